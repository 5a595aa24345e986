"""The `Effects` virtual object: the effect ledger's entries in Restate state, one object
per idempotency key (by its digest, `ledger.ledger_key`).

A finished entry is pruned after the retention (`TEASPILL_EFFECT_RETENTION_SECONDS`): its
`finish` sends the object a delayed `expire`, which clears it. A step is retried within
its invocation's life, long before that; an entry whose call never finished (its process
died mid-call) is kept, so its retry keeps answering "unknown"."""

from __future__ import annotations

from datetime import timedelta

import restate

from schemas.effects import Claim, Effect, Finished
from services.contracts import BEGIN_EFFECT, EFFECTS, EXPIRE_EFFECT, FINISH_EFFECT, Empty
from services.durable import send

ENTRY = "effect"


def effects_object(retention: timedelta | None = None) -> restate.VirtualObject:
    """`retention`: how long a finished entry is kept (None: for good)."""
    effects = restate.VirtualObject(
        EFFECTS, description="The effect ledger: one side-effecting call per key."
    )

    @effects.handler(name=BEGIN_EFFECT.name)
    async def begin(ctx: restate.ObjectContext) -> Claim:
        entry = await ctx.get(ENTRY, type_hint=Effect)
        if entry is None:
            ctx.set(ENTRY, Effect())
            return Claim(first=True)
        return Claim(first=False, finished=entry.finished)

    @effects.handler(name=FINISH_EFFECT.name)
    async def finish(ctx: restate.ObjectContext, finished: Finished) -> Empty:
        ctx.set(ENTRY, Effect(finished))
        if retention is not None:
            send(ctx, EXPIRE_EFFECT, Empty(), key=ctx.key(), delay=retention)
        return Empty()

    @effects.handler(name=EXPIRE_EFFECT.name)
    async def expire(ctx: restate.ObjectContext) -> Empty:
        entry = await ctx.get(ENTRY, type_hint=Effect)
        if entry is not None and entry.finished is not None:
            ctx.clear(ENTRY)
        return Empty()

    return effects
