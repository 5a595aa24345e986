"""The `TenantSchedules` virtual object, keyed by a tenant: how many schedules its agents
have, against the tenant's ceiling (TEASPILL_TENANT_SCHEDULES).

Only the `Schedules` objects write it: `add` asks `take` (refused at the ceiling) before
it keeps a schedule; a removed schedule, or an `at` schedule that fired, is given back
one-way.
"""

from __future__ import annotations

import restate

from services.contracts import GIVE_SCHEDULE, TAKE_SCHEDULE, TENANT_SCHEDULES, Empty
from services.durable import take_slot
from services.settings import settings

COUNT = "count"

tenant_schedules = restate.VirtualObject(
    TENANT_SCHEDULES, description="How many schedules a tenant's agents have."
)


@tenant_schedules.handler(name=TAKE_SCHEDULE.name)
async def take(ctx: restate.ObjectContext) -> Empty:
    await take_slot(
        ctx,
        COUNT,
        settings().tenant_schedules,
        lambda count: (
            f"Tenant {ctx.key()}'s agents have {count} schedules, the most one tenant "
            "may have (TEASPILL_TENANT_SCHEDULES): remove one first."
        ),
    )
    return Empty()


@tenant_schedules.handler(name=GIVE_SCHEDULE.name)
async def give_back(ctx: restate.ObjectContext) -> Empty:
    count = await ctx.get(COUNT, type_hint=int) or 0
    ctx.set(COUNT, max(0, count - 1))
    return Empty()
