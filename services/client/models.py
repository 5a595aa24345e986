"""What the gateway answers, as typed values. Timeline events are `schemas.events.Event`,
live text `schemas.live.LiveDelta`; the rest is declared here. Unknown fields are ignored,
so a newer gateway that adds fields does not break an older client."""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.events import Event
from schemas.live import LiveDelta, Retraction
from schemas.tenant import Scope

Item = Event | LiveDelta | Retraction
"""What `follow` yields: a recorded event, a piece of live text, or a retraction."""


class Agent(msgspec.Struct, frozen=True):
    address: str
    kind: str
    spec_version: int
    status: Literal["idle", "running", "waiting", "parked", "paused"] | str
    turn: int
    last_seq: int
    last_outcome: str | None
    last_activity: str
    queued: int = 0
    """Messages the agent holds queued (see the gateway's agent row)."""


class Forked(msgspec.Struct, frozen=True):
    """A fork made (201): `address` holds `source`'s first `seq` events, then its
    `agent_forked` at `last_seq`."""

    address: str
    source: str
    seq: int
    last_seq: int
    turn: int
    events_url: str


class AgentPage(msgspec.Struct, frozen=True):
    agents: tuple[Agent, ...]
    next: str | None = None


class Accepted(msgspec.Struct, frozen=True):
    """A message was taken: follow from `after_seq` to see what it does."""

    address: str
    after_seq: int
    events_url: str
    invocation_id: str = ""
    message_id: str = ""
    """The id the `turn_started` of the turn this message starts carries (empty from a
    gateway that gives none)."""


class ApprovalAccepted(msgspec.Struct, frozen=True):
    """The answer is held (202): the agent applies it in its next wake. The timeline
    after `after_seq` shows `approval_answered`, or `approval_refused` and why."""

    address: str
    request_id: str
    approve: bool
    after_seq: int
    events_url: str
    invocation_id: str = ""


class HoldAccepted(msgspec.Struct, frozen=True):
    """A pause or a resume is held (202). The timeline after `after_seq` shows
    `agent_paused` or `agent_resumed` when it applied."""

    address: str
    message: str
    after_seq: int
    events_url: str
    invocation_id: str = ""


class StopAccepted(msgspec.Struct, frozen=True):
    """The stop is held (202). The timeline after `after_seq` shows the turn ending
    `stopped`, or `stop_refused` when no turn was in progress."""

    address: str
    message: str
    after_seq: int
    events_url: str
    invocation_id: str = ""


class Me(msgspec.Struct, frozen=True):
    """Who the key is: its tenant and scope."""

    tenant: str
    scope: Scope
    key_id: str
    key_name: str = ""


class KeyInfo(msgspec.Struct, frozen=True):
    id: str
    tenant: str
    scope: Scope
    created_at: str
    revoked_at: str | None = None
    name: str = ""
    """What the key is for, as its maker named it; approvals show it."""


class NewKey(msgspec.Struct, frozen=True):
    """A key just made: `key` is its plaintext, shown this once."""

    key: str
    info: KeyInfo


class PublishedKind(msgspec.Struct, frozen=True):
    kind: str
    version: int
    model: str


class Deployment(msgspec.Struct, frozen=True):
    """What the deployment offers the key's tenant: the model and tool names a spec may
    use (`checked` is False when it does not check them) and the published kinds."""

    models: tuple[str, ...]
    tools: tuple[str, ...]
    checked: bool
    problem: str
    kinds: tuple[PublishedKind, ...]


class KeyList(msgspec.Struct, frozen=True):
    keys: tuple[KeyInfo, ...]


class Hook(msgspec.Struct, frozen=True):
    """A webhook, as `GET /v1/hooks` shows it ([webhooks](../../docs/webhooks.md))."""

    id: str
    url: str
    template: str
    address: str | None
    kind: str | None
    while_busy: str
    created: str | None


class NewHook(Hook, frozen=True):
    """A webhook just made: `secret` signs its deliveries, shown this once."""

    secret: str = ""


class HookList(msgspec.Struct, frozen=True):
    hooks: tuple[Hook, ...]
