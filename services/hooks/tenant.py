"""The `TenantHooks` virtual object, keyed by a tenant: the list of its hooks, for the
admin's listing and the tenant's ceiling (TEASPILL_TENANT_HOOKS).

Only the `Hooks` object writes it: `create` asks `add` (which refuses past the ceiling)
before it keeps the hook, and `delete` asks `remove`, so a listing after either shows it.
Deliveries never read it.
"""

from __future__ import annotations

import restate

from schemas.hook import HookEntry, HookRef, TenantHookList
from services.contracts import INDEX_HOOK, LIST_HOOKS, TENANT_HOOKS, UNINDEX_HOOK, Empty
from services.settings import settings

STATE = "hooks"

tenant_hooks = restate.VirtualObject(TENANT_HOOKS, description="A tenant's webhooks.")


@tenant_hooks.handler(name=INDEX_HOOK.name)
async def add(ctx: restate.ObjectContext, entry: HookEntry) -> Empty:
    listed = await ctx.get(STATE, type_hint=TenantHookList) or TenantHookList()
    most = settings().tenant_hooks
    if len(listed.hooks) >= most:
        raise restate.TerminalError(
            f"Tenant {ctx.key()} has {len(listed.hooks)} hooks, the most one tenant may have "
            "(TEASPILL_TENANT_HOOKS): remove one first.",
            429,
        )
    ctx.set(STATE, TenantHookList((*listed.hooks, entry)))
    return Empty()


@tenant_hooks.handler(name=UNINDEX_HOOK.name)
async def remove(ctx: restate.ObjectContext, ref: HookRef) -> Empty:
    listed = await ctx.get(STATE, type_hint=TenantHookList) or TenantHookList()
    ctx.set(STATE, TenantHookList(tuple(e for e in listed.hooks if e.id != ref.id)))
    return Empty()


@tenant_hooks.handler(name=LIST_HOOKS.name, kind="shared")
async def listing(ctx: restate.ObjectSharedContext) -> TenantHookList:
    return await ctx.get(STATE, type_hint=TenantHookList) or TenantHookList()
