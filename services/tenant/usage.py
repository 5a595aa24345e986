"""The `TenantUsage` virtual object, keyed by a tenant: what the tenant's agents used of
the quotas that hold across agents, durably, where the work runs.

- Model tokens of the UTC day (`TEASPILL_TENANT_DAILY_TOKENS`), lent to wakes: as a
  turn starts, and before a round's model step, a wake that holds less than it needs asks
  `lease` (a call, journaled); once the tenant's day is lent or used, it is lent nothing,
  and a turn that would start is refused (one that started goes on: the funding rule,
  `services/agent/funding.py`). At its end the wake sends `settle` one-way with
  what it was lent and what its steps used, and the day's count becomes what was used
  (a step past its lease is counted in full). A call and a send are journal entries of
  the wake, so a replay after a crash neither asks again nor settles twice. The count
  holds what running wakes were lent and did not use yet: they are the tokens other
  wakes cannot have. Only the newest day is kept: the count starts at 0 each UTC day.
- Agents (`TEASPILL_TENANT_AGENTS`): an agent a message brought into being counts itself
  one-way as its first turn is driven (the gateway decided on it already); a spawn takes
  one with `take_agent` before the child is sent its task, refused (429) at the ceiling.
"""

from __future__ import annotations

import restate

from schemas.lifecycle import Released
from schemas.tenant import TokenLease, TokensGranted, TokensQuery, TokensSettled, TokensToday
from services.contracts import (
    COUNT_AGENT,
    GIVE_AGENTS,
    LEASE_TOKENS,
    SETTLE_TOKENS,
    TAKE_AGENT,
    TENANT_USAGE,
    TOKENS,
    Empty,
)
from services.durable import take_slot
from services.settings import settings

DAY = "tokens"
AGENTS = "agents"

tenant_usage = restate.VirtualObject(
    TENANT_USAGE, description="A tenant's model tokens of the day and its agents, counted."
)


def lent(stored: TokensToday | None, lease: TokenLease, limit: int) -> TokensToday:
    """The day's count with what `lease` is lent taken from it (`tokens` of the answer
    is the count after; the grant is the difference). A day older than the stored one is
    lent from the stored day: a wake whose clock is behind takes today's tokens."""
    day = stored if stored is not None and stored.day >= lease.day else TokensToday(lease.day)
    grant = max(0, min(lease.want, limit - day.tokens)) if limit else lease.want
    return TokensToday(day.day, day.tokens + grant)


def settled(stored: TokensToday | None, settle: TokensSettled) -> TokensToday | None:
    """The day's count once a wake's lease is replaced by what it used; None when the
    lease was of a day already over."""
    if stored is None or stored.day != settle.day:
        return None
    return TokensToday(stored.day, max(0, stored.tokens + settle.spent - settle.granted))


@tenant_usage.handler(name=LEASE_TOKENS.name)
async def lease(ctx: restate.ObjectContext, asked: TokenLease) -> TokensGranted:
    stored = await ctx.get(DAY, type_hint=TokensToday)
    after = lent(stored, asked, settings().tenant_daily_tokens)
    before = stored.tokens if stored is not None and stored.day == after.day else 0
    ctx.set(DAY, after)
    return TokensGranted(after.day, after.tokens - before)


@tenant_usage.handler(name=SETTLE_TOKENS.name)
async def settle(ctx: restate.ObjectContext, done: TokensSettled) -> Empty:
    day = settled(await ctx.get(DAY, type_hint=TokensToday), done)
    if day is not None:
        ctx.set(DAY, day)
    return Empty()


@tenant_usage.handler(name=TOKENS.name, kind="shared")
async def tokens(ctx: restate.ObjectSharedContext, query: TokensQuery) -> TokensToday:
    stored = await ctx.get(DAY, type_hint=TokensToday)
    return stored if stored is not None and stored.day == query.day else TokensToday(query.day)


@tenant_usage.handler(name=TAKE_AGENT.name)
async def take_agent(ctx: restate.ObjectContext) -> Empty:
    await take_slot(
        ctx,
        AGENTS,
        settings().tenant_agents,
        lambda count: (
            f"No more helpers may be started: tenant {ctx.key()} has {count} agents, "
            "the most one tenant may have (TEASPILL_TENANT_AGENTS)."
        ),
    )
    return Empty()


@tenant_usage.handler(name=COUNT_AGENT.name)
async def count_agent(ctx: restate.ObjectContext) -> Empty:
    ctx.set(AGENTS, (await ctx.get(AGENTS, type_hint=int) or 0) + 1)
    return Empty()


@tenant_usage.handler(name=GIVE_AGENTS.name)
async def give_agents(ctx: restate.ObjectContext, released: Released) -> Empty:
    count = await ctx.get(AGENTS, type_hint=int) or 0
    ctx.set(AGENTS, max(0, count - released.count))
    return Empty()
