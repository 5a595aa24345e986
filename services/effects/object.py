"""The `Effects` virtual object: the effect ledger's entries in Restate state, one object
per idempotency key (by its digest, `ledger.ledger_key`).

A finished entry is pruned after the retention (`TEASPILL_EFFECT_RETENTION_SECONDS`): its
`finish` sends the object a delayed `expire`, which clears it. A step is retried within
its invocation's life, long before that; an entry whose call never finished (its process
died mid-call) is kept, so its retry keeps answering "unknown". Beside the entry the object
keeps the agent whose call it is (`owner`), so an erasure finds the entries of its agents
in Restate, whether or not the projection shows their calls yet; a `finish` whose entry is
gone (erased meanwhile) writes nothing."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import restate

from schemas.effects import Begin, Claim, Effect, Finished
from services.contracts import BEGIN_EFFECT, EFFECTS, EXPIRE_EFFECT, FINISH_EFFECT, Empty
from services.durable import send

ENTRY = "effect"
OWNER = "owner"
"""The agent whose call the entry is, as JSON text: what an erasure finds it by."""


def effects_object(retention: timedelta | None = None) -> restate.VirtualObject:
    """`retention`: how long a finished entry is kept (None: for good)."""
    effects = restate.VirtualObject(
        EFFECTS, description="The effect ledger: one side-effecting call per key."
    )

    @effects.handler(name=BEGIN_EFFECT.name, input_serde=restate.serde.BytesSerde())
    async def begin(ctx: restate.ObjectContext, raw: bytes) -> Claim:
        entry = await ctx.get(ENTRY, type_hint=Effect)
        if entry is None:
            ctx.set(ENTRY, Effect())
            if owner := _begun(raw).owner:
                ctx.set(OWNER, owner)
            return Claim(first=True)
        return Claim(first=False, finished=entry.finished)

    @effects.handler(name=FINISH_EFFECT.name)
    async def finish(ctx: restate.ObjectContext, finished: Finished) -> Empty:
        if await ctx.get(ENTRY, type_hint=Effect) is None:
            return Empty()  # never begun, or erased since: nothing is written again
        ctx.set(ENTRY, Effect(finished))
        if retention is not None:
            send(ctx, EXPIRE_EFFECT, Empty(), key=ctx.key(), delay=retention)
        return Empty()

    @effects.handler(name=EXPIRE_EFFECT.name)
    async def expire(ctx: restate.ObjectContext) -> Empty:
        entry = await ctx.get(ENTRY, type_hint=Effect)
        if entry is not None and entry.finished is not None:
            ctx.clear_all()
        return Empty()

    return effects


def _begun(raw: bytes) -> Begin:
    """A begin sent before entries named their agent has no body."""
    if not raw:
        return Begin()
    try:
        return msgspec.json.decode(raw, type=Begin)
    except msgspec.DecodeError as error:
        message = f"Effects.begin takes an object naming its owner: {error}."
        raise restate.TerminalError(message, 400) from error
