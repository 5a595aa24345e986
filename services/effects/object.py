"""The `Effects` virtual object: the effect ledger's entries in Restate state, one object
per idempotency key (by its digest, `ledger.ledger_key`)."""

from __future__ import annotations

import restate

from schemas.effects import Claim, Effect, Finished
from services.contracts import BEGIN_EFFECT, EFFECTS, FINISH_EFFECT, Empty

ENTRY = "effect"


def effects_object() -> restate.VirtualObject:
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
        return Empty()

    return effects
