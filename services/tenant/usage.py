"""The `TenantUsage` virtual object, keyed by a tenant: what the tenant's agents used of
the quotas that hold across agents, durably, where the work runs.

- Model tokens of the UTC day (`TEASPILL_TENANT_DAILY_TOKENS`): every model step of an
  agent sends what it used one-way to `add_tokens`, on the day the step finished (its
  journaled end); a round reads the day's count through the shared `tokens` before its
  model step, and is refused once it reached the limit. A send is one journal entry of
  the agent's wake, so a replay after a crash never adds a step twice. Only the newest
  day is kept: the count starts again at 0 each UTC day.
- Agents (`TEASPILL_TENANT_AGENTS`): an agent a message brought into being counts itself
  one-way at its first wake (the gateway decided on it already); a spawn takes one with
  `take_agent` before the child is sent its task, refused (429) at the ceiling.
"""

from __future__ import annotations

import restate

from schemas.tenant import TokensQuery, TokensToday, TokensUsed
from services.contracts import ADD_TOKENS, COUNT_AGENT, TAKE_AGENT, TENANT_USAGE, TOKENS, Empty
from services.settings import settings

DAY = "tokens"
AGENTS = "agents"

tenant_usage = restate.VirtualObject(
    TENANT_USAGE, description="A tenant's model tokens of the day and its agents, counted."
)


def added(stored: TokensToday | None, used: TokensUsed) -> TokensToday | None:
    """The day's count with `used` added; None when `used` is of a day already over."""
    if stored is None or used.day > stored.day:
        return TokensToday(used.day, used.tokens)
    if used.day == stored.day:
        return TokensToday(stored.day, stored.tokens + used.tokens)
    return None


@tenant_usage.handler(name=ADD_TOKENS.name)
async def add_tokens(ctx: restate.ObjectContext, used: TokensUsed) -> Empty:
    if used.tokens > 0:
        day = added(await ctx.get(DAY, type_hint=TokensToday), used)
        if day is not None:
            ctx.set(DAY, day)
    return Empty()


@tenant_usage.handler(name=TOKENS.name, kind="shared")
async def tokens(ctx: restate.ObjectSharedContext, query: TokensQuery) -> TokensToday:
    stored = await ctx.get(DAY, type_hint=TokensToday)
    return stored if stored is not None and stored.day == query.day else TokensToday(query.day)


@tenant_usage.handler(name=TAKE_AGENT.name)
async def take_agent(ctx: restate.ObjectContext) -> Empty:
    count = await ctx.get(AGENTS, type_hint=int) or 0
    most = settings().tenant_agents
    if count >= most:
        raise restate.TerminalError(
            f"No more helpers may be started: tenant {ctx.key()} has {count} agents, the most "
            "one tenant may have (TEASPILL_TENANT_AGENTS).",
            429,
        )
    ctx.set(AGENTS, count + 1)
    return Empty()


@tenant_usage.handler(name=COUNT_AGENT.name)
async def count_agent(ctx: restate.ObjectContext) -> Empty:
    ctx.set(AGENTS, (await ctx.get(AGENTS, type_hint=int) or 0) + 1)
    return Empty()
