"""Settings, read from `TEASPILL_*` environment variables.

`TEASPILL_HOME` relocates all state (Restate's data, SQLite files, logs, ledgers), so two
stacks on one machine stay apart when they use different homes and ports.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TEASPILL_", frozen=True)

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
    live_url: str = Field(
        default="",
        description="Where the execution plane pushes live deltas; empty: the gateway on "
        "this machine (127.0.0.1 and TEASPILL_GATEWAY_PORT).",
    )
    live_token: str = Field(
        default="",
        description="Shared secret the execution plane uses to push live deltas to the "
        "gateway; empty: made up per stack by `teaspill up`.",
    )
    model_path: Path | None = Field(
        default=None,
        description="GGUF file for the `smollm2` model; default: the bundled SmolLM2-135M.",
    )
    model_threads: int = Field(default=2, ge=1, description="CPU threads per loaded model.")
    model_context: int = Field(default=4096, ge=512, description="Context window in tokens.")
    tool_modules: tuple[str, ...] = Field(
        default=(),
        description="Extra modules whose `TOOLS` list is added to the tool registry.",
    )
    observer_modules: tuple[str, ...] = Field(
        default=(),
        description="Modules whose `OBSERVERS` list is told about every timeline event.",
    )
    bwrap: str = Field(
        default="bwrap",
        description="The bubblewrap program workspace commands run in (a name on PATH or a "
        "path); when it is missing, commands are refused, never run unsandboxed.",
    )
    model_modules: tuple[str, ...] = Field(
        default=(),
        description="Extra modules whose `MODELS` mapping is added to the model registry.",
    )

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
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.endpoint_port}"


@lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings()
