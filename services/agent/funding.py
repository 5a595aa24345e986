"""The funding rule, pure: whether a turn may start is decided before it starts, and a
turn that started is never cut for money.

Two budgets are days of model tokens: the agent's own (`max_daily_tokens` of its spec's
limits, counted in its ledger) and its tenant's (`TEASPILL_TENANT_DAILY_TOKENS`, lent to
wakes by the tenant's `TenantUsage` object). A message whose turn would start once either
day is used is refused with a sentence before the turn exists (no `turn_started`); a turn
under way when a day runs out runs to its end, and what its rounds use is counted (so a
day may end past its limit by what the turns running then used).
"""

from __future__ import annotations

from schemas.spec import Limits
from schemas.state import Ledger
from services.agent.pipeline import LEASE_SHARE, Lease


def agent_refusal(limits: Limits, ledger: Ledger, day: str) -> str | None:
    """The sentence when the agent's own day (`max_daily_tokens`) is used on `day`."""
    most = limits.max_daily_tokens
    if not most or ledger.day != day or ledger.day_tokens < most:
        return None
    return (
        f"The agent used {ledger.day_tokens} model tokens on {day} (UTC), its limit for a day "
        f"(max_daily_tokens = {most}): it starts no turn until midnight UTC."
    )


def opening_want(limit: int) -> int:
    """Tokens a starting turn asks its tenant for when its wake holds none of the day: the
    most a wake may hold beyond one step's estimate, so most turns ask once."""
    return max(1, limit // LEASE_SHARE)


def tenant_refusal(tenant: str, limit: int, lease: Lease) -> str | None:
    """The sentence when the wake holds none of the tenant's day and was lent nothing
    more: the tenant's agents used (or hold) the day's tokens."""
    if lease.left > 0:
        return None
    return (
        f"Tenant {tenant}'s agents used the day's {limit} model tokens "
        f"(TEASPILL_TENANT_DAILY_TOKENS) on {lease.day} (UTC): no turn starts until "
        "midnight UTC."
    )
