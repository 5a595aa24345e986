"""What the HTTP API takes and gives, as pydantic models: their errors and their OpenAPI
description are the point. Timeline events and specs are answered as the msgspec types of
`schemas` (see `openapi.py`), byte for byte as the projection holds them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from schemas.pages import MAX_PAGE_TOOLS, PAGE_ID_PATTERN, PAGE_TOOL_PATTERN
from services.keys import NAME_PATTERN

KIND_PATTERN = r"^[A-Za-z0-9_-]{1,48}$"
MAX_TEXT = 32768

Kind = Annotated[str, StringConstraints(pattern=KIND_PATTERN)]
AgentStatusName = Literal["idle", "running", "waiting", "parked", "paused", "archived"]


class Strict(BaseModel):
    """No coercion: a boolean is only a JSON boolean, an integer only a JSON integer."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PageToolIn(Strict):
    """A tool the sending page runs itself (AG-UI's frontend tools): the spec grants it as
    `page:NAME` (or `page:*`)."""

    name: Annotated[str, StringConstraints(pattern=PAGE_TOOL_PATTERN)] = Field(
        description="The tool's name, as the model will call it."
    )
    description: str = Field(default="", max_length=2000, description="What it does.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="The JSON Schema of its arguments (an object schema).",
    )


class MessageIn(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The user's message.")
    kind: Kind | None = Field(
        default=None,
        description="A published spec kind: the turn runs its newest version. Needed to "
        "create an agent; for an existing agent it switches the agent to that kind.",
    )
    while_busy: Literal["queue", "interrupt", "steer", "reject"] | None = Field(
        default=None,
        description="If a turn is in progress when the message arrives: `queue` runs it "
        "after that turn, `interrupt` stops that turn and runs this one, `steer` adds it "
        "to that turn at its next round, `reject` refuses it (409). Unset: the spec's "
        "`while_busy`, `queue` by default.",
    )
    page_tools: list[PageToolIn] = Field(
        default=[],
        max_length=MAX_PAGE_TOOLS,
        description="Tools the sending page runs itself; the turn shows the model those its "
        "spec grants (`page:NAME`, `page:*`), and a call to one waits for an open page of "
        "the conversation to claim it and post its result (docs/agui.md).",
    )


class ApprovalIn(Strict):
    approve: bool = Field(
        description="true runs the call; false tells the model it was denied. Only a JSON boolean."
    )
    note: str = Field(default="", max_length=2000, description="A note the model will read.")
    answers: dict[str, dict[str, Any]] = Field(
        default={},
        max_length=32,
        description="For a call that asks for input (`approval_requested` with `questions`): "
        "per question key, the form's values as its schema asks. With `approve: false` the "
        "call is declined and no answers are sent.",
    )


PageId = Annotated[str, StringConstraints(pattern=PAGE_ID_PATTERN)]


class PageClaimIn(Strict):
    page: PageId = Field(
        description="The page's own id: the `page` of the stream it follows the "
        "conversation with (closing that stream before the result loses the request)."
    )


class PageClaimed(Strict):
    """200: this page runs the call, once, and posts its result."""

    address: str
    request_id: str
    call_id: str
    name: str = Field(description="The page tool to run.")
    arguments: dict[str, Any] = Field(description="The model's arguments (untrusted).")
    page: str


class PageResultIn(Strict):
    page: PageId = Field(description="The id of the page that claimed the request.")
    content: str = Field(description="What the model reads as the call's result.")
    status: Literal["ok", "error"] = Field(
        default="ok", description="`error`: the tool ran and failed; the content says how."
    )
    kind: Literal["response", "page", "other"] = Field(
        default="other",
        description="What the content is, for its cap: a response body (16,000 characters), "
        "a read of the page (16,000), anything else (20,000). Past its cap the result is "
        "dropped and the model is told so.",
    )


class Accepted(Strict):
    """202: Restate holds the request durably and the agent applies it in its next wake,
    even if the service endpoint is restarting; the outcome lands on the timeline."""

    address: str
    invocation_id: str = Field(description="Restate's id of the invocation that carries it.")
    after_seq: int = Field(description="The agent's last recorded seq when it was sent.")
    events_url: str = Field(description="Follow from here to see its outcome.")


class MessageAccepted(Accepted):
    message_id: str = Field(
        description="The message's id: the `turn_started` of the turn it starts carries it "
        "as `message_id` (the same for every retry with one `Idempotency-Key`)."
    )


class ApprovalAccepted(Accepted):
    request_id: str
    approve: bool


class PageResultAccepted(Accepted):
    request_id: str
    dropped: bool = Field(description="The result was past its cap: the model is told so.")


class StopAccepted(Accepted):
    message: str = Field(description="One sentence saying what happens next.")


class HoldAccepted(Accepted):
    """A pause or a resume is held (202); `agent_paused` or `agent_resumed` says when it
    applied."""

    message: str = Field(description="One sentence saying what happens next.")


class AgentOut(Strict):
    address: str
    kind: str
    spec_version: int
    status: str = Field(description="idle, running, waiting, parked or paused.")
    turn: int
    last_seq: int
    last_outcome: str | None
    last_activity: str = Field(description="When its newest event was recorded (ISO 8601).")
    queued: int = Field(
        default=0,
        description="Messages the agent holds queued (behind a turn that waits, or while "
        "paused, or behind a running turn from that turn's next round boundary).",
    )


class AgentPage(Strict):
    agents: list[AgentOut]
    next: str | None = Field(description="Pass as `after` for the next page; null at the end.")


class Health(Strict):
    status: Literal["ok"]


class LiveAccepted(Strict):
    deltas: int = Field(description="How many deltas the batch held.")
    fresh: int = Field(description="How many brought text followers had not had.")
    held: list[int] = Field(
        description="Per delta, the length of its round's text this gateway holds after "
        "it: where the next push to this gateway starts (less than the delta's end after a "
        "gap, which the next push fills)."
    )


class ProjectedAccepted(Strict):
    agents: int = Field(description="How many agents the notice named.")
    followed: int = Field(description="How many of them this gateway's followers follow.")


ScopeName = Literal["read", "write", "admin", "publishable"]


class ConversationOut(Strict):
    kind: str
    address: str = Field(description="Derived from the tenant, the kind and the end user.")


class MeOut(Strict):
    tenant: str
    scope: ScopeName
    key_id: str
    key_name: str = Field(default="", description="The key's name; empty if it has none.")
    user: str = Field(
        default="", description="A publishable key's end user, as the request's token names them."
    )
    conversations: list[ConversationOut] = Field(
        default=[],
        description="A publishable key's conversations for that end user, one per kind it "
        "lists (an address has an agent once its first message is sent).",
    )


class KeyIn(Strict):
    scope: ScopeName = Field(
        default="read",
        description="read, write or admin (each allows what the one before does), or "
        "publishable: a key for a page, with `origins` and `kinds`.",
    )
    name: str = Field(
        default="",
        pattern=NAME_PATTERN,
        description="What the key is for (up to 60 letters, digits, spaces and . _ @ -); "
        "approvals made with it show it.",
    )
    origins: list[str] = Field(
        default=[],
        max_length=20,
        description="A publishable key's origins, as browsers send them "
        "(`https://app.example.com`): it is valid only from these.",
    )
    kinds: list[Kind] = Field(
        default=[],
        max_length=20,
        description="The published kinds a publishable key's end users may talk to.",
    )


class KeyOut(Strict):
    id: str
    tenant: str
    scope: ScopeName
    created_at: str
    revoked_at: str | None = None
    name: str = ""
    origins: list[str] = []
    kinds: list[str] = []


class KeysOut(Strict):
    keys: list[KeyOut]


class KeyCreated(Strict):
    key: str = Field(description="The key itself, `tsk_<id>_<secret>`: shown this once.")
    info: KeyOut


class EndUsersIn(Strict):
    algorithm: Literal["HS256", "RS256", "ES256"] | None = Field(
        default=None,
        description="How end-user tokens are signed; null registers no key (tokens refused).",
    )
    key: str = Field(
        default="",
        max_length=8192,
        description="The HS256 secret (32 bytes at least), or the PEM public key for RS256 "
        "and ES256.",
    )
    audience: str = Field(default="", max_length=200, description="If set, `aud` must name it.")
    issuer: str = Field(default="", max_length=200, description="If set, `iss` must be it.")
    anonymous: bool = Field(
        default=False,
        description="Whether visitors without a token may have conversations of their own "
        "(through visitor tokens from POST /v1/visitors).",
    )


class EndUsersOut(Strict):
    algorithm: Literal["HS256", "RS256", "ES256"] | None
    key_sha256: str = Field(
        description="The first 16 hex digits of the key's SHA-256: never the key."
    )
    audience: str
    issuer: str
    anonymous: bool
    registered_at: str | None


class VisitorOut(Strict):
    user: str = Field(description="The visitor's id, `visitor:<hex>`.")
    token: str = Field(description="Send it in `Teaspill-User` with the publishable key.")
    expires_at: str


class ConversationsOut(Strict):
    user: str
    conversations: list[AgentOut] = Field(
        description="The end user's conversations that exist, one per kind at most."
    )


class KindOut(Strict):
    kind: str
    version: int = Field(description="Its newest version: what a turn of it runs.")
    model: str


class DeploymentOut(Strict):
    models: list[str] = Field(description="Model names a spec may use, fallbacks included.")
    tools: list[str] = Field(description="Tool names a spec may grant.")
    checked: bool = Field(
        description="False when the deployment does not check names (the lists are empty)."
    )
    problem: str = Field(description="Why some models are missing, or empty.")
    kinds: list[KindOut] = Field(description="The tenant's published kinds, by name.")


class ErrorDetail(Strict):
    status: int
    message: str = Field(description="One sentence: what was wrong and what is accepted.")


class ErrorOut(Strict):
    error: ErrorDetail


class HealthDown(Strict):
    status: Literal["unavailable"]
    parts: dict[str, str] = Field(description="`ok`, or why the part does not answer.")
    error: ErrorDetail


class ScheduleIn(Strict):
    """A schedule: the message it sends and exactly one of `every`, `cron` and `at`."""

    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The message it sends.")
    every: str | None = Field(
        default=None, max_length=40, description="A duration: 90s, 5m, 1h30m, 2d."
    )
    cron: str | None = Field(
        default=None,
        max_length=200,
        description="Five cron fields (minute hour day-of-month month day-of-week).",
    )
    zone: str = Field(
        default="UTC", max_length=64, description="The time zone `cron` reads the clock in."
    )
    at: AwareDatetime | None = Field(
        default=None,
        strict=False,
        description="One instant in ISO 8601 with its offset; fires once.",
    )
    while_busy: Literal["queue", "interrupt", "steer", "skip"] = Field(
        default="queue",
        description="A fire that finds a turn in progress: its message queues, interrupts "
        "or steers as a message's `while_busy` does, or the fire is skipped "
        "(`schedule_skipped` on the timeline).",
    )
    kind: Kind | None = Field(
        default=None, description="A published kind, for an agent the first fire creates."
    )

    @model_validator(mode="after")
    def one_clock(self) -> ScheduleIn:
        given = [name for name in ("every", "cron", "at") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "a schedule takes exactly one of 'every', 'cron' and 'at', got "
                + (", ".join(repr(g) for g in given) or "none")
            )
        return self


class HookIn(Strict):
    """A webhook: where each delivery goes, and the message made of it."""

    template: str = Field(
        min_length=1,
        max_length=4000,
        description="The message; `{{ field.path }}` is filled from the delivered JSON "
        "(`{{ commits.0.id }}`, `{{ . }}` for all of it).",
    )
    address: str | None = Field(
        default=None, max_length=200, description="The agent every delivery is sent to."
    )
    kind: Kind | None = Field(
        default=None,
        description="A published kind: without `address`, each delivery starts a new agent "
        "of it; with one, it creates that agent on the first delivery.",
    )
    while_busy: Literal["queue", "interrupt", "steer", "reject"] = Field(
        default="queue",
        description="The `while_busy` of each delivery's message: what it does when it "
        "finds a turn in progress.",
    )


class HookOut(Strict):
    id: str
    url: str = Field(description="Where the sender delivers: `POST` with the signature headers.")
    template: str
    address: str | None
    kind: str | None
    while_busy: str
    created: str | None


class HooksOut(Strict):
    hooks: list[HookOut] = Field(description="The tenant's hooks, oldest first.")


class HookCreated(HookOut):
    secret: str = Field(
        description="The signing secret (`whsec_...`), shown this once: the sender signs "
        "each delivery with it, as Standard Webhooks says."
    )


class DeliveryAccepted(Strict):
    """202: Restate holds the delivery; its message reaches the agent once, however often
    it is delivered."""

    hook: str
    webhook_id: str
    invocation_id: str


PRINTABLE_ASCII = r"^[ -~]+$"
"""What an `Idempotency-Key` header may hold: it is sent on to Restate as a header."""
