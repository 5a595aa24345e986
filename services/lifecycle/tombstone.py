"""A tenant's tombstone: set in its `Lifecycle` state as its erasure begins, marked done
as it ends, and kept for good (an erasure keeps the `Lifecycle` state).

Whatever makes something of a tenant asks first: a new agent's first wake and a fork
(`services.agent`), a publish, a new key and the end-user registration (`Tenant`), a
memory (`Memory.remember`) and a document (`Knowledge.upload`), and the gateway for a key
it has not confirmed lately. All of them are refused once the
tombstone is there, with its sentence: 410 (Gone) while the erasure runs as well as after,
since an erasure once begun is never undone and asking again cannot succeed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import restate

from schemas.lifecycle import Standing, Tombstone
from services.contracts import STANDING, TOMBSTONE, Empty
from services.durable import call

GONE = 410
KEY_MARGIN = timedelta(seconds=1)
"""Added to the gateway's key cache time: a lookup that read a key just before the
tombstone was set finishes, and starts its time, a little after it."""


async def refuse_if_erased(ctx: restate.ObjectContext, tenant: str) -> None:
    """Raise 410 with the tombstone's sentence when `tenant`'s erasure has begun."""
    standing = await call(ctx, STANDING, Empty(), key=tenant)
    if standing.tombstone is not None:
        raise restate.TerminalError(standing.tombstone.sentence(tenant), GONE)


async def bury(ctx: restate.ObjectContext, by: str) -> Tombstone:
    """The tenant's tombstone, set now unless an earlier erasure set it. The next step
    the erasure journals carries it to Restate's storage before anything is found."""
    kept = await ctx.get(TOMBSTONE.name, type_hint=Tombstone)
    if kept is not None:
        return kept
    tombstone = Tombstone(datetime.fromtimestamp(await ctx.time(), UTC), by)
    ctx.set(TOMBSTONE.name, tombstone)
    return tombstone


def buried(ctx: restate.ObjectContext, tombstone: Tombstone) -> None:
    """Mark the erasure ended."""
    ctx.set(TOMBSTONE.name, Tombstone(tombstone.since, tombstone.by, done=True))


async def wait_out_keys(
    ctx: restate.ObjectContext, tombstone: Tombstone, key_cache: timedelta
) -> None:
    """Sleep (a durable timer) until every gateway's cached answer for the tenant's keys,
    taken before the tombstone, has run out: after that no gateway takes them, so the
    erasure's last pass finds everything that could still come in."""
    now = datetime.fromtimestamp(await ctx.time(), UTC)
    left = tombstone.since + key_cache + KEY_MARGIN - now
    if left > timedelta(0):
        await ctx.sleep(left)


async def standing(ctx: restate.ObjectSharedContext) -> Standing:
    return Standing(await ctx.get(TOMBSTONE.name, type_hint=Tombstone))
