"""Webhooks: signed deliveries from other systems, each a message to an agent.

A hook is kept by the `Hooks` object keyed by its id (`{tenant}.{random}`); its signing
secret is kept nowhere: the gateway derives it from its signing key and the id.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from schemas.spec import WhileBusy


class HookSpec(msgspec.Struct, frozen=True):
    tenant: str
    template: str
    """The message, with `{{ field.path }}` placeholders filled from the delivered JSON."""
    address: str | None = None
    """The agent each delivery is sent to; None: a new agent of `kind` per delivery."""
    kind: str | None = None
    while_busy: WhileBusy = "queue"
    """The `while_busy` of each delivery's message."""
    created: datetime | None = None


class HookEntry(msgspec.Struct, frozen=True):
    id: str
    hook: HookSpec


class TenantHookList(msgspec.Struct, frozen=True):
    """A tenant's hooks, oldest first (the `TenantHooks` object's state and answer)."""

    hooks: tuple[HookEntry, ...] = ()


class HookRef(msgspec.Struct, frozen=True):
    id: str


class HookAnswer(msgspec.Struct, frozen=True):
    hook: HookSpec | None = None


class Delivery(msgspec.Struct, frozen=True):
    """A verified delivery: its `webhook-id` and the body, as the JSON text it came as."""

    webhook_id: str
    body: str
