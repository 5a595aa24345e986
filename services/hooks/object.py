"""The `Hooks` virtual object, keyed by a hook's id: the hook, and its deliveries.

A delivery reaches `deliver` as a one-way send the gateway made with the idempotency key
`webhook {hook} {webhook-id}`: Restate runs one invocation per key for as long as it
keeps the key (`RETENTION`), however often the sender retries. `deliver` fills the
template and sends the agent a message like any other, as a journaled one-way send.
"""

from __future__ import annotations

import contextlib
import hashlib
from datetime import timedelta
from typing import Any

import msgspec
import restate

from schemas.hook import Delivery, HookAnswer, HookEntry, HookRef, HookSpec
from schemas.wake import Message
from services.contracts import (
    CREATE_HOOK,
    DELETE_HOOK,
    DELIVER,
    GET_HOOK,
    HOOKS,
    INDEX_HOOK,
    UNINDEX_HOOK,
    Empty,
)
from services.durable import call, deliver
from services.hooks.template import render

STATE = "hook"
RETENTION = timedelta(days=3)
"""How long a delivery's `webhook-id` is remembered: past the retries of senders that
follow Standard Webhooks (about a day and a half at most)."""

hooks = restate.VirtualObject(
    HOOKS,
    description="A webhook: where its deliveries go and how they become a message.",
    idempotency_retention=RETENTION,
)


@hooks.handler(name=CREATE_HOOK.name)
async def create(ctx: restate.ObjectContext, spec: HookSpec) -> HookSpec:
    if await ctx.get(STATE, type_hint=HookSpec) is not None:
        raise restate.TerminalError(f"There is a hook {ctx.key()} already.", 409)
    await call(ctx, INDEX_HOOK, HookEntry(ctx.key(), spec), key=spec.tenant)
    ctx.set(STATE, spec)
    return spec


@hooks.handler(name=DELETE_HOOK.name)
async def delete(ctx: restate.ObjectContext) -> HookSpec:
    """Deliveries sent before still arrive, and find no hook: they do nothing."""
    hook = await ctx.get(STATE, type_hint=HookSpec)
    if hook is None:
        raise restate.TerminalError(f"There is no hook {ctx.key()}.", 404)
    ctx.clear(STATE)
    await call(ctx, UNINDEX_HOOK, HookRef(ctx.key()), key=hook.tenant)
    return hook


@hooks.handler(name=GET_HOOK.name, kind="shared")
async def get(ctx: restate.ObjectSharedContext) -> HookAnswer:
    return HookAnswer(await ctx.get(STATE, type_hint=HookSpec))


@hooks.handler(name=DELIVER.name, kind="shared")
async def take_delivery(ctx: restate.ObjectSharedContext, delivery: Delivery) -> Empty:
    hook = await ctx.get(STATE, type_hint=HookSpec)
    if hook is None:
        return Empty()
    body: Any = None
    with contextlib.suppress(msgspec.DecodeError, RecursionError):
        body = msgspec.json.decode(delivery.body)  # the gateway took only JSON
    digest = hashlib.sha256(f"{ctx.key()}\n{delivery.webhook_id}".encode()).hexdigest()[:24]
    text = render(hook.template, body)
    message = Message(text, kind=hook.kind, id=f"h{digest}", while_busy=hook.while_busy)
    await deliver(ctx, target(hook, ctx.key(), digest), message)
    return Empty()


def target(hook: HookSpec, hook_id: str, digest: str) -> str:
    """The hook's agent, or a new one per delivery, named after the hook and the delivery."""
    if hook.address is not None:
        return hook.address
    return f"{hook.tenant}.hook-{hook_id.split('.', 1)[1]}-{digest[:12]}"
