"""Settings, read from `TEASPILL_*` environment variables.

`TEASPILL_HOME` relocates all state (Restate's data, SQLite files, logs, ledgers), so two
stacks on one machine stay apart when they use different homes and ports.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from schemas.sandbox import Allowed, parse_allowed

PREFIX = "TEASPILL_"

Modules = Annotated[tuple[str, ...], NoDecode]
"""Module names, from a comma-separated variable (`a,b`) or a JSON list (`["a", "b"]`)."""


class ConfigError(ValueError):
    """A setting, a plugin module or a model file the deployment cannot run with; the
    message is one sentence naming the variable and what it accepts."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, frozen=True)

    home: Path = Field(default=Path(".teaspill"), description="Where all state lives.")
    restate_host: str = Field(
        default="127.0.0.1", description="Where the services reach Restate's ingress and admin."
    )
    ingress_port: int = Field(default=8080, description="Restate ingress (loopback only).")
    admin_port: int = Field(default=9070, description="Restate admin API (loopback only).")
    node_port: int = Field(default=5122, description="Restate node-to-node port.")
    endpoint_port: int = Field(default=9080, description="The service endpoint Restate calls.")
    gateway_port: int = Field(default=8000, description="The public HTTP API.")
    gateway_host: str = Field(default="127.0.0.1", description="Where the gateway listens.")
    max_body_bytes: int = Field(default=65536, ge=1024, description="Largest request body.")
    page_max_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Most bytes of events in one timeline page (and in one read of a "
        "follower's catch-up); a page holds at least one event, whatever its size.",
    )
    history_max_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="Most bytes of events an AG-UI history (`MESSAGES_SNAPSHOT`) is built "
        "from: the newest whole turns that fit.",
    )
    otlp_endpoint: str = Field(
        default="",
        description="The OTLP/HTTP collector the gateway and the endpoint send their spans "
        "to (its base URL: `/v1/traces` is added); empty: no spans are made or sent.",
    )
    restate_tracing_endpoint: str = Field(
        default="",
        description="The OTLP/gRPC collector restate-server sends its own spans to (its "
        "`tracing-endpoint`); empty: restate-server exports none.",
    )
    metrics_token: str = Field(
        default="",
        description="The bearer token `GET /metrics` needs (`Authorization: Bearer <token>`); "
        "empty: /metrics is switched off (403).",
    )
    key_rate: float = Field(
        default=20.0,
        ge=0,
        description="Requests a second one API key may send to the gateway, on average "
        "(429 with Retry-After beyond); 0: no limit.",
    )
    key_burst: int = Field(
        default=40, ge=1, description="Requests one API key may send at once above its rate."
    )
    visitor_rate: float = Field(
        default=2.0,
        ge=0,
        description="Visitor tokens a second one publishable key may be given (POST "
        "/v1/visitors), on average (429 with Retry-After beyond); 0: no limit.",
    )
    visitor_burst: int = Field(
        default=20, ge=1, description="Visitor tokens one publishable key may be given at once."
    )
    visitor_conversations: int = Field(
        default=1000,
        ge=0,
        description="Visitor conversations one publishable key may create in a day, UTC, per "
        "gateway (429 with Retry-After beyond); 0: no limit.",
    )
    key_streams: int = Field(
        default=8,
        ge=1,
        description="Streams one API key may hold open at once: SSE, AG-UI, and the A2A and "
        "MCP requests that wait on a turn (429, or the protocol's error, beyond).",
    )
    key_cache_seconds: float = Field(
        default=10.0,
        ge=0,
        description="Seconds the gateway trusts a key lookup: a revoked key stops working "
        "within this; 0 checks every request.",
    )
    read_connections: int = Field(
        default=4, ge=1, le=64, description="Connections the gateway reads the projection through."
    )
    projection_url: str = Field(
        default="",
        description="The PostgreSQL projection store (postgresql://...) that every process "
        "of the installation writes and reads; empty: the SQLite file in the home.",
    )
    embeddings_url: str = Field(
        default="",
        description="An OpenAI-compatible server's base URL (`http://HOST:PORT/v1`: "
        "`/embeddings` is added) whose vectors rank memory and knowledge searches together "
        "with BM25 (hybrid); empty: BM25 only.",
    )
    embeddings_model: str = Field(
        default="default",
        description="The `model` asked of the embeddings server; vectors of another model are "
        "made again.",
    )
    embeddings_key: str = Field(
        default="", description="The bearer token sent to the embeddings server, if it needs one."
    )
    embeddings_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Seconds a search waits for its query's vector before it ranks by BM25 alone.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Seconds the gateway waits for a request body to arrive (408 beyond).",
    )
    tenant_agents: int = Field(
        default=1000,
        ge=1,
        description="Agents one tenant may have; a message that would create one more is "
        "refused (429).",
    )
    archive_idle_days: float = Field(
        default=0,
        ge=0,
        le=3650,
        description="Days after its last event an idle agent is archived by `agents "
        "archive-idle` (out of Restate to the archive store); 0: only when asked with days.",
    )
    timeline_keep_chunks: int = Field(
        default=64,
        ge=0,
        le=1_000_000,
        description="Timeline chunks (one or more a wake) an agent's Restate state keeps; "
        "once it holds 16 more, the older ones move to the archive store, from where reads "
        "still serve them; 0: all stay in Restate.",
    )
    journal_retention_seconds: int = Field(
        default=24 * 3600,
        ge=0,
        le=3650 * 24 * 3600,
        description="How long restate-server keeps the journal of a finished invocation "
        "(its input and each step's result) of every service that sets no retention of its "
        "own: the Agent object's wakes among them; 0 keeps none. Services that carry "
        "documents, memories, prompts or files keep none whatever this says.",
    )
    effect_retention_seconds: float = Field(
        default=7 * 24 * 3600,
        ge=0,
        le=3650 * 24 * 3600,
        description="How long the effect ledger keeps a finished side-effecting call's entry "
        "(its result, for a retry of its step) before it is pruned; 0 keeps it for good.",
    )
    agent_queue: int = Field(
        default=100,
        ge=1,
        description="Messages one agent may hold queued (behind a turn in progress, or while "
        "paused); one more is refused (429).",
    )
    tenant_keys: int = Field(
        default=100, ge=1, description="API keys one tenant may hold that are not revoked."
    )
    tenant_kinds: int = Field(default=100, ge=1, description="Spec kinds one tenant may publish.")
    spec_versions: int = Field(
        default=1000, ge=1, description="Versions of one spec kind one tenant may publish."
    )
    tenant_daily_tokens: int = Field(
        default=10_000_000,
        ge=0,
        description="Model tokens one tenant's agents may use in a day (UTC); past it, new "
        "messages are refused until the next day; 0: no limit.",
    )
    agent_schedules: int = Field(
        default=20,
        ge=1,
        description="Schedules one agent may have.",
    )
    tenant_schedules: int = Field(
        default=1000, ge=1, description="Schedules one tenant's agents may have together."
    )
    schedule_min_seconds: float = Field(
        default=60.0,
        gt=0,
        description="The shortest gap a schedule may leave between two fires (an `every` or "
        "a cron expression).",
    )
    hook_key_file: Path | None = Field(
        default=None,
        description="The key the gateway derives each webhook's signing secret from; "
        "empty: `hooks/signing.key` in the home, made on first use. Gateways that serve "
        "the same hooks need the same file.",
    )
    tenant_hooks: int = Field(default=100, ge=1, description="Webhooks one tenant may have.")
    tenant_documents: int = Field(
        default=1000,
        ge=1,
        description="Knowledge documents (drafts too) one tenant may keep; one more is "
        "refused (429).",
    )
    tenant_document_chars: int = Field(
        default=50_000_000,
        ge=1,
        description="Characters one tenant's knowledge documents may hold together; an "
        "upload past it is refused (429).",
    )
    hook_max_bytes: int = Field(
        default=32768,
        ge=1024,
        description="Largest webhook delivery body (413 beyond); also bounded by "
        "TEASPILL_MAX_BODY_BYTES.",
    )
    hook_rate: float = Field(
        default=5.0,
        ge=0,
        description="Deliveries a second one webhook may make (429 with Retry-After "
        "beyond); 0: no limit.",
    )
    hook_burst: int = Field(default=20, ge=1, description="Deliveries of one webhook at once.")
    keep_alive_seconds: int = Field(
        default=5,
        ge=1,
        description="Seconds the gateway and the endpoint keep an idle connection open, and "
        "wait for a request's headers.",
    )
    endpoint_read_timeout_seconds: int = Field(
        default=1800,
        ge=60,
        description="Seconds the endpoint waits on a silent connection before closing it: "
        "above any step's inactivity and abort timeouts.",
    )
    live_url: str = Field(
        default="",
        description="Where the execution plane pushes live deltas; empty: the gateway on "
        "this machine (127.0.0.1 and TEASPILL_GATEWAY_PORT).",
    )
    live_urls: tuple[str, ...] = Field(
        default=(),
        description="Gateways the execution plane pushes live deltas to, each on its own "
        'and from its own offset (a JSON list, e.g. ["http://10.0.0.5:8000"]); empty: '
        "TEASPILL_LIVE_URL's one.",
    )
    live_token: str = Field(
        default="",
        description="Shared secret the execution plane uses to push live deltas to the "
        "gateway; empty: made up per stack by `teaspill up`.",
    )
    notify_urls: tuple[str, ...] = Field(
        default=(),
        description="Gateways the projector tells of newly projected events, so that their "
        'followers get them at once (a JSON list, e.g. ["http://10.0.0.5:8000"]); empty: the '
        "gateway live deltas go to.",
    )
    notify_token: str = Field(
        default="",
        description="Shared secret the projector uses to tell gateways of new events; empty: "
        "TEASPILL_LIVE_TOKEN. With neither set, nothing is told and gateways poll the "
        "projection.",
    )
    feed_poll_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Seconds between a gateway's reads of a followed agent besides the "
        "projector's notices; empty: 1 when a notify or live token is set, else 0.05.",
    )
    model_path: Path | None = Field(
        default=None,
        description="GGUF file for the `smollm2` model; default: the bundled SmolLM2-135M.",
    )
    model_threads: int = Field(default=2, ge=1, description="CPU threads per loaded model.")
    model_context: int = Field(default=4096, ge=512, description="Context window in tokens.")
    model_cache_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=0,
        description="Bytes of llama.cpp state kept for recent agents' prompt prefixes (least "
        "recently used dropped first); 0 keeps only the prefix the model holds.",
    )
    models_file: Path | None = Field(
        default=None,
        description="TOML file naming OpenAI-compatible model servers (docs/models.md).",
    )
    mcp_servers_file: Path | None = Field(
        default=None,
        description="TOML file naming the MCP servers whose tools specs may grant "
        "(`mcp:SERVER/TOOL`), how to reach each and which tenants may use it (docs/mcp.md).",
    )
    scripted_model: bool = Field(
        default=False, description="Offer the scripted fake model `script` (tests and demos)."
    )
    local_only_tenants: Modules = Field(
        default=(),
        description="Tenants whose agents run only on models tagged `local`, as if each of "
        "their specs said `local_only = true`.",
    )
    tool_modules: Modules = Field(
        default=(),
        description="Extra modules whose `TOOLS` list is added to the tool registry.",
    )
    harness_modules: Modules = Field(
        default=(),
        description="Extra modules whose `HARNESSES` mapping (name to harness) is added to "
        "the harnesses specs may name (docs/harnesses.md).",
    )
    tool_deadline_seconds: float = Field(
        default=60.0,
        gt=0,
        le=840,
        description="Seconds a tool call (the calculator, a module's tool, a workspace file "
        "tool) may take; past it the call fails with a sentence, and a side-effecting one is "
        "reported with an unknown outcome and not run again. At most 840 (the Agent's step "
        "timeout is 15 minutes).",
    )
    observer_modules: Modules = Field(
        default=(),
        description="Modules whose `OBSERVERS` list is told about every timeline event.",
    )
    bwrap: str = Field(
        default="bwrap",
        description="The bubblewrap program workspace commands run in (a name on PATH or a "
        "path); when it is missing, commands are refused, never run unsandboxed.",
    )
    model_modules: Modules = Field(
        default=(),
        description="Extra modules whose `MODELS` mapping is added to the model registry.",
    )
    network_tenants: Modules = Field(
        default=(),
        description="Tenants whose specs may turn `workspace.network` on; a spec asking for "
        "it for any other tenant is refused when it is published.",
    )
    network_allow: Modules = Field(
        default=(),
        description="Exceptions to the sandbox's blocked ranges (loopback, link-local, "
        "private): addresses or CIDRs (`10.1.2.0/24`), or address:port (`10.1.2.3:443`, "
        "`[fd00::1]:80`), reachable from a workspace with network.",
    )
    workspace_max_quota_mb: int = Field(
        default=1024, ge=256, description="Ceiling on a spec's `workspace.quota_mb`."
    )
    workspace_max_wall_seconds: float = Field(
        default=600, ge=60, le=600, description="Ceiling on `workspace.limits.wall_seconds`."
    )
    workspace_max_cpu_seconds: float = Field(
        default=300, ge=30, le=600, description="Ceiling on `workspace.limits.cpu_seconds`."
    )
    workspace_max_memory_mb: int = Field(
        default=2048, ge=512, description="Ceiling on `workspace.limits.memory_mb`."
    )
    workspace_max_processes: int = Field(
        default=256, ge=64, description="Ceiling on `workspace.limits.processes`."
    )
    workspace_max_output_bytes: int = Field(
        default=100_000_000,
        ge=1_000_000,
        description="Ceiling on `workspace.limits.output_bytes`.",
    )
    workspace_disk: Literal["auto", "image", "folder"] = Field(
        default="auto",
        description="Where workspaces live: `image`, a btrfs image in the home, mounted at "
        "$TEASPILL_HOME/workspaces, each workspace a subvolume whose quota the kernel enforces "
        "(needs root, loop devices and btrfs-progs; the endpoint refuses to start without "
        "them); `folder`, plain folders whose quota is checked after each command; `auto`, "
        "the image where it can be had, else folders.",
    )
    workspace_image_mb: int | None = Field(
        default=None,
        ge=256,
        description="Size of the workspaces' image when it is made (a sparse file: it takes "
        "only what the workspaces hold); empty: the size of the disk that holds the home.",
    )
    sandbox_tmp_mb: int = Field(
        default=64, ge=1, description="Size of a command's /tmp, and of its /dev/shm."
    )
    disk_reserve_mb: int = Field(
        default=1024,
        ge=0,
        description="Free space the disk holding the home keeps: below it commands are refused.",
    )
    identity_keys: Modules = Field(
        default=(),
        description="Public keys (`publickeyv1_...`) whose signature the service endpoint "
        "accepts on a request; empty: the key pair in the home (`identity/`), made on first "
        "start, which the stack gives restate-server. Unsigned requests are refused.",
    )

    @field_validator(
        "tool_modules",
        "harness_modules",
        "observer_modules",
        "model_modules",
        "local_only_tenants",
        "identity_keys",
        "network_tenants",
        "network_allow",
        mode="before",
    )
    @classmethod
    def _module_list(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            return json.loads(value)
        return tuple(name.strip() for name in value.split(",") if name.strip())

    @field_validator("projection_url")
    @classmethod
    def _projection(cls, value: str) -> str:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                "give a PostgreSQL URL (postgresql://USER@HOST/DATABASE), or leave it empty "
                "for the SQLite file in the home"
            )
        return value

    @field_validator("network_allow")
    @classmethod
    def _allowed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_allowed(entry)
        return value

    @property
    def allowed(self) -> tuple[Allowed, ...]:
        """The network allow-list, parsed."""
        return tuple(parse_allowed(entry) for entry in self.network_allow)

    @property
    def ingress_url(self) -> str:
        return f"http://{self.restate_host}:{self.ingress_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.restate_host}:{self.admin_port}"

    @property
    def live_push_url(self) -> str:
        """The gateway the execution plane pushes live deltas to."""
        return self.live_url or f"http://127.0.0.1:{self.gateway_port}"

    @property
    def live_targets(self) -> tuple[str, ...]:
        """The gateways the execution plane pushes live deltas to."""
        return self.live_urls or (self.live_push_url,)

    @property
    def notify_secret(self) -> str:
        """The token on the projector's notices to gateways; empty: no notices."""
        return self.notify_token or self.live_token

    @property
    def notify_targets(self) -> tuple[str, ...]:
        """The gateways the projector tells of new events."""
        return self.notify_urls or (self.live_push_url,)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.endpoint_port}"


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment (and `overrides`); a `ConfigError` naming each
    variable that is wrong, instead of pydantic's report."""
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise ConfigError(" ".join(_sentence(e) for e in error.errors())) from None
    except (SettingsError, ValueError) as error:
        raise ConfigError(f"A TEASPILL_ setting cannot be read: {error}.") from None


_UNSHOWN = frozenset({"projection_url", "embeddings_url", "embeddings_key"})
"""Settings whose value an error leaves out: a URL can carry a password."""


def _sentence(error: Any) -> str:
    field = ".".join(str(part) for part in error["loc"])
    variable = f"{PREFIX}{field}".upper()
    why = str(error["msg"]).removeprefix("Value error, ")
    given = error.get("input")
    secret = field in _UNSHOWN
    shown = f"={given}" if isinstance(given, str | int | float) and not secret else ""
    return f"{variable}{shown} is not valid: {why[0].lower()}{why[1:]}."


@lru_cache(maxsize=1)
def settings() -> Settings:
    return load_settings()
