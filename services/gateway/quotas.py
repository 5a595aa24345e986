"""Tenant quotas the gateway checks before it sends a message: how many agents a tenant
may have (`TEASPILL_TENANT_AGENTS`), and how many model tokens its agents may use in a
day, UTC (`TEASPILL_TENANT_DAILY_TOKENS`).

Here both are decided before a message is sent: one that would create an agent past the
quota, or that arrives once the day's tokens are used, is refused with 429 and a sentence.
Both are read from the projection: the day's tokens are summed again at most every
`RECHECK_SECONDS` per tenant. The agents hold both as well, where the work runs
(`services/tenant/usage.py`): a turn that would start past the tenant's day is refused
before it exists (a turn that started runs to its end), and a spawn past the tenant's
agents is refused.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from services.gateway.errors import ApiError
from services.gateway.reader import ProjectionReader

RECHECK_SECONDS = 5.0


class Quotas:
    def __init__(self, projection: ProjectionReader, agents: int, daily_tokens: int) -> None:
        self.projection = projection
        self.agents = agents
        self.daily_tokens = daily_tokens
        self._tokens: dict[str, tuple[str, int, float]] = {}
        """Per tenant: the day, its tokens, and when they were summed (monotonic)."""

    async def new_agent(self, tenant: str) -> None:
        """Raises 429 when `tenant` has its most agents already."""
        count = await self.projection.read(lambda store: store.agent_count(tenant))
        if count >= self.agents:
            raise ApiError(
                429,
                f"tenant {tenant} has {count} agents, the most one tenant may have: send to "
                "an agent that exists, or ask the operator to raise TEASPILL_TENANT_AGENTS",
            )

    async def tokens(self, tenant: str) -> None:
        """Raises 429 (with `Retry-After`: until midnight UTC) once `tenant`'s agents used
        the day's tokens."""
        if not self.daily_tokens:
            return
        now = datetime.now(UTC)  # noqa: TID251 - the gateway is not durable code
        day = now.date().isoformat()
        used = await self._used(tenant, day, now)
        if used >= self.daily_tokens:
            midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
            wait = max(1, int((midnight - now).total_seconds()))
            raise ApiError(
                429,
                f"tenant {tenant}'s agents used {used} model tokens on {day} (UTC), the most "
                f"for a day ({self.daily_tokens}): new messages are taken again tomorrow",
                {"Retry-After": str(wait)},
            )

    def forget(self) -> None:
        """Sum every tenant's tokens again at its next message."""
        self._tokens.clear()

    async def _used(self, tenant: str, day: str, now: datetime) -> int:
        known = self._tokens.get(tenant)
        if known is not None and known[0] == day and time.monotonic() - known[2] < RECHECK_SECONDS:
            return known[1]
        midnight = datetime.combine(now.date(), datetime.min.time(), UTC)
        used = await self.projection.read(lambda store: store.tokens_since(tenant, midnight))
        self._tokens[tenant] = (day, used, time.monotonic())
        return used
