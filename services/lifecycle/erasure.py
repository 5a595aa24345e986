"""The `Lifecycle` object, keyed by tenant: erasing one agent (with the agents it spawned)
or a whole tenant, and the record of each erasure.

An erasure is one invocation of journaled steps, so one interrupted by a crash goes on
where it stopped. A tenant's erasure first sets the tenant's tombstone
(`tombstone.py`), after which nothing of the tenant is made again. Its steps, in order:

1. find what to remove, before anything is removed: the agents (in Restate's state, and in
   the projection), the ledger keys of their side-effecting calls (the `Effects` entries
   that name them as their owner, and those the projection's events show), the artifacts no other
   agent wrote, and (for a tenant) its webhooks;
2. kill every invocation of those objects that has not finished (queued ones first), so
   nothing in flight writes again;
3. clear their Restate state (the admin API), and wait until the state table holds none;
4. remove their workspaces and those artifacts (the execution plane's `Workspace.erase`),
   and their prompt-cache entries (`Model.forget`);
5. delete their projection rows, overwritten in the file, the WAL checkpointed, and
   their archived copies (`services.lifecycle.archive`);
6. purge the finished invocations of those objects (their journals and retained results);
7. for a tenant: wait until no gateway takes its keys any longer (their cache time from
   the tombstone), then steps 1 to 6 again for what came in meanwhile (an agent whose
   first wake had begun before the tombstone, a memory written with a cached key), and
   mark the tombstone done;
8. record who asked, when and what was removed, by name and count.

The journal of the erasure holds names, digests and counts only. What is left afterwards,
and for how long, is in docs/operations.md ("Delete and erase").
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

import msgspec
import restate

from schemas.address import InvalidAddressError, parse_address
from schemas.hook import HookSpec
from schemas.lifecycle import (
    ArchiveIdle,
    Erased,
    ErasureList,
    ErasureRecord,
    ErasureRequest,
    ErasureTargets,
    IdleArchived,
    MemoryErasure,
    Released,
    WorkspaceErase,
)
from schemas.memory import MemoryAnswer, MemoryRef
from services.contracts import (
    AGENT,
    ARCHIVE,
    ARCHIVE_IDLE,
    EFFECTS,
    ERASE_AGENT,
    ERASE_MEMORIES,
    ERASE_TENANT,
    ERASURES,
    FORGET,
    FORGET_MEMORIES,
    FORGET_MEMORY,
    GIVE_AGENTS,
    GIVE_SCHEDULE,
    HOOKS,
    KNOWLEDGE,
    LIFECYCLE,
    LIST_SCHEDULES,
    MEMORY,
    PROJECTOR,
    SCHEDULES,
    STANDING,
    TENANT,
    TENANT_HOOKS,
    TENANT_SCHEDULES,
    TENANT_USAGE,
    WORKSPACE_ERASE,
    Empty,
)
from services.durable import call, send, step_options
from services.effects.object import OWNER
from services.lifecycle.archive import ArchiveStore
from services.lifecycle.restate_admin import RestateAdminApi, Target
from services.lifecycle.tombstone import buried, bury, standing, wait_out_keys
from services.projection.projector import Projection

log = logging.getLogger("teaspill.lifecycle")
AdminWork = Callable[[RestateAdminApi], Erased]
RECORDS = "erasures"
KEEP_RECORDS = 1000
PER_AGENT = (AGENT, SCHEDULES, PROJECTOR)
"""The objects keyed by an agent's address."""
PER_TENANT = (
    TENANT, TENANT_HOOKS, TENANT_SCHEDULES, TENANT_USAGE, KNOWLEDGE, PROJECTOR, LIFECYCLE,
)  # fmt: skip
"""The objects keyed by the tenant (its `Lifecycle` state, the erasure records, is kept);
the `Projector`'s tenant key writes its specs, keys, documents and memories."""


def lifecycle_object(
    projection: Projection,
    admin_url: str,
    archive: ArchiveStore,
    idle_days: float = 0,
    key_cache: timedelta = timedelta(0),
) -> restate.VirtualObject:
    """`idle_days`: `TEASPILL_ARCHIVE_IDLE_DAYS`, after which `archive_idle` archives an
    idle agent (0: only when asked with days of its own); `key_cache`: how long a gateway
    trusts a key lookup (`TEASPILL_KEY_CACHE_SECONDS`), which a tenant's erasure waits out
    before its last pass."""
    lifecycle = restate.VirtualObject(
        LIFECYCLE,
        description="Erases agents and tenants, and records each erasure.",
        inactivity_timeout=timedelta(minutes=5),
    )
    eraser = Eraser(projection, admin_url, archive, key_cache)

    @lifecycle.handler(name=ERASE_AGENT.name)
    async def erase_agent(ctx: restate.ObjectContext, request: ErasureRequest) -> ErasureRecord:
        try:
            address = str(parse_address(request.address))
        except InvalidAddressError as error:
            raise restate.TerminalError(str(error), 400) from error
        if parse_address(address).tenant != ctx.key():
            raise restate.TerminalError(f"{address} is not an agent of tenant {ctx.key()}.", 403)
        return await eraser.erase(ctx, "agent", address, request.by)

    @lifecycle.handler(name=ERASE_TENANT.name)
    async def erase_tenant(ctx: restate.ObjectContext, request: ErasureRequest) -> ErasureRecord:
        return await eraser.erase(ctx, "tenant", ctx.key(), request.by)

    @lifecycle.handler(name=ERASE_MEMORIES.name)
    async def erase_memories(ctx: restate.ObjectContext, asked: MemoryErasure) -> MemoryAnswer:
        return await forget_memories(ctx, asked)

    @lifecycle.handler(name=ARCHIVE_IDLE.name)
    async def archive_idle(ctx: restate.ObjectContext, asked: ArchiveIdle) -> IdleArchived:
        days = asked.days or idle_days
        if days <= 0:
            raise restate.TerminalError(
                "Archiving idle agents is off: set TEASPILL_ARCHIVE_IDLE_DAYS, or ask with "
                "days of your own.",
                422,
            )
        return await archive_idle_agents(ctx, projection, days)

    lifecycle.handler(name=STANDING.name, kind="shared")(standing)

    @lifecycle.handler(name=ERASURES.name, kind="shared")
    async def erasures(ctx: restate.ObjectSharedContext) -> ErasureList:
        return await ctx.get(RECORDS, type_hint=ErasureList) or ErasureList()

    return lifecycle


class Eraser:
    def __init__(
        self,
        projection: Projection,
        admin_url: str,
        archive: ArchiveStore,
        key_cache: timedelta = timedelta(0),
    ) -> None:
        self._projection = projection
        self._admin_url = admin_url
        self._archive = archive
        self._key_cache = key_cache

    async def erase(
        self, ctx: restate.ObjectContext, what: Literal["agent", "tenant"], target: str, by: str
    ) -> ErasureRecord:
        tenant = ctx.key() if what == "tenant" else None
        tombstone = await bury(ctx, by) if tenant is not None else None
        swept = await self._sweep(ctx, target, tenant, "")
        if tombstone is not None:
            await wait_out_keys(ctx, tombstone, self._key_cache)
            swept = swept.then(await self._sweep(ctx, target, tenant, "final "))
            buried(ctx, tombstone)
        at = datetime.fromtimestamp(await ctx.time(), UTC)
        record = swept.record(at, by, what, target)
        kept = await ctx.get(RECORDS, type_hint=ErasureList) or ErasureList()
        ctx.set(RECORDS, ErasureList((*kept.records, record)[-KEEP_RECORDS:]))
        log.info(
            "erased %s %s for %s: %d agents, %d events, %d invocations",
            what, target, by or "-", len(record.agents), record.events, record.invocations,
        )  # fmt: skip
        return record

    async def _sweep(
        self, ctx: restate.ObjectContext, target: str, tenant: str | None, step: str
    ) -> Swept:
        """One pass over everything of the target: a tenant's erasure makes a second,
        once no gateway takes its keys, for what came in while the first ran."""

        async def find() -> ErasureTargets:
            return await self._find(target, tenant)

        found = await ctx.run_typed(f"{step}find", find, step_options(ErasureTargets))
        objects = targets_of(found, tenant)
        schedules = 0 if tenant else await _schedules(ctx, found.agents)
        killed = await self._admin(
            ctx, f"{step}stop", lambda a: Erased(invocations=a.stop_all(objects))
        )
        cleared = await self._admin(ctx, f"{step}clear", lambda a: Erased(keys=a.clear(objects)))
        if tenant is None:  # a tenant's counts are cleared with it
            _give_back(ctx, found.counted, schedules)
        removed = await call(ctx, WORKSPACE_ERASE, WorkspaceErase(found.agents, found.artifacts))
        await call(ctx, FORGET, found)

        async def rows() -> Empty:
            await self._projection.erase(target, tenant=tenant)
            return Empty()

        await ctx.run_typed(f"{step}projection", rows, step_options(Empty))
        copies = await ctx.run_typed(
            f"{step}archive", lambda: self._copies(found, tenant), step_options(Erased)
        )
        purged = await self._admin(
            ctx, f"{step}purge", lambda a: Erased(invocations=a.purge_all(objects))
        )
        invocations = killed.invocations + purged.invocations
        return Swept(found, removed, invocations, cleared.keys, copies.keys)

    def _copies(self, found: ErasureTargets, tenant: str | None) -> Erased:
        """Remove the archived copies of the agents (every copy of a tenant's)."""
        dropped = sum(self._archive.delete(agent) for agent in found.agents)
        dropped += sum(self._archive.delete_chunks(agent) for agent in found.agents)
        if tenant is not None:
            dropped += self._archive.delete_tenant(tenant)
        return Erased(keys=dropped)

    async def _admin(self, ctx: restate.ObjectContext, name: str, work: AdminWork) -> Erased:
        def run() -> Erased:
            admin = RestateAdminApi(self._admin_url)
            try:
                return work(admin)
            finally:
                admin.close()

        return await ctx.run_typed(name, run, step_options(Erased))

    async def _find(self, prefix: str, tenant: str | None) -> ErasureTargets:
        held = await self._projection.erasable(prefix)

        def restate_side() -> tuple[set[str], tuple[str, ...], tuple[str, ...], set[str]]:
            admin = RestateAdminApi(self._admin_url)
            try:
                # A tenant's agents with an invocation but no state yet too: one made
                # while the erasure began, or refused by its tombstone (its message kept).
                agents = admin.keys_with_prefix(AGENT, prefix, invoked=tenant is not None)
                hooks = hooks_of(admin, tenant) if tenant is not None else ()
                effects = admin.keys_owned(EFFECTS, OWNER, prefix)
                return agents, hooks, memories_of(admin, prefix, tenant), effects

            finally:
                admin.close()

        agents, hooks, memories, effects = await asyncio.to_thread(restate_side)
        # The projection names the calls its events show (entries begun before entries
        # named their agent too); Restate, every entry begun, projected yet or not.
        effects |= {ledger_key(key) for key in held.idempotency_keys}
        return ErasureTargets(
            tuple(sorted(agents | set(held.agents))),
            tuple(sorted(effects)),
            held.artifacts,
            hooks,
            held.events,
            held.started,
            memories,
            held.written,
        )


async def _schedules(ctx: restate.ObjectContext, agents: tuple[str, ...]) -> int:
    """How many schedules the agents have, which their tenant counts."""
    listed = [await call(ctx, LIST_SCHEDULES, Empty(), key=agent) for agent in agents]
    return sum(len(found.schedules) for found in listed)


def _give_back(ctx: restate.ObjectContext, agents: int, schedules: int) -> None:
    """The erased agents' places in their tenant's counts, one-way."""
    tenant = ctx.key()
    if agents:
        send(ctx, GIVE_AGENTS, Released(agents), key=tenant)
    for _ in range(schedules):
        send(ctx, GIVE_SCHEDULE, Empty(), key=tenant)


async def archive_idle_agents(
    ctx: restate.ObjectContext, projection: Projection, days: float
) -> IdleArchived:
    """Archive the tenant's agents idle for longer than `days`, one after another; an
    agent whose turn started meanwhile (or that is paused) is left."""
    before = datetime.fromtimestamp(await ctx.time(), UTC) - timedelta(days=days)

    async def idle() -> IdleFound:
        return IdleFound(tuple(await projection.idle_since(ctx.key(), before.isoformat())))

    found = await ctx.run_typed("idle", idle, step_options(IdleFound))
    archived, left = [], []
    for address in found.agents:
        try:
            await call(ctx, ARCHIVE, Empty(), key=address)
            archived.append(address)
        except restate.TerminalError as refused:
            if refused.status_code not in (404, 409):
                raise
            left.append(address)
    return IdleArchived(tuple(archived), tuple(left))


async def forget_memories(ctx: restate.ObjectContext, asked: MemoryErasure) -> MemoryAnswer:
    """Forget one record or every record of a scope of the tenant, then record it: who,
    when, the scope (and the record's id), never the text. A record the scope does not
    hold is answered as not found, and nothing is recorded."""
    scope = asked.scope
    if scope.tenant != ctx.key():
        raise restate.TerminalError(f"{scope.key} is not a memory scope of {ctx.key()}.", 403)
    if asked.memory_id:
        answer = await call(ctx, FORGET_MEMORY, MemoryRef(asked.memory_id), key=scope.key)
        if not answer.found:
            return answer
    else:
        answer = await call(ctx, FORGET_MEMORIES, scope, key=scope.key)
        if answer.problem:
            return answer
    at = datetime.fromtimestamp(await ctx.time(), UTC)
    record = ErasureRecord(
        at, asked.by, "memory", scope.key, state_keys=1, memory_id=asked.memory_id
    )
    kept = await ctx.get(RECORDS, type_hint=ErasureList) or ErasureList()
    ctx.set(RECORDS, ErasureList((*kept.records, record)[-KEEP_RECORDS:]))
    return answer


@dataclass(frozen=True)
class Swept:
    """What one pass of an erasure found and removed."""

    found: ErasureTargets
    removed: Erased
    invocations: int
    state_keys: int
    archived: int

    def then(self, later: Swept) -> Swept:
        """This pass and a later one together."""
        a, b = self.found, later.found
        found = ErasureTargets(
            tuple(sorted({*a.agents, *b.agents})),
            events=a.events + b.events,
            counted=a.counted + b.counted,
            written=a.written + b.written,
        )
        removed = Erased(
            self.removed.workspaces + later.removed.workspaces,
            self.removed.artifacts + later.removed.artifacts,
        )
        return Swept(
            found,
            removed,
            self.invocations + later.invocations,
            self.state_keys + later.state_keys,
            self.archived + later.archived,
        )

    def record(
        self, at: datetime, by: str, what: Literal["agent", "tenant"], target: str
    ) -> ErasureRecord:
        return ErasureRecord(
            at, by, what, target, self.found.agents, self.found.events,
            self.removed.workspaces, self.found.written, self.invocations,
            self.state_keys, self.archived,
        )  # fmt: skip


class IdleFound(msgspec.Struct, frozen=True):
    agents: tuple[str, ...]


def memories_of(admin: RestateAdminApi, prefix: str, tenant: str | None) -> tuple[str, ...]:
    """The keys of the `Memory` objects an erasure clears and purges: every scope of a
    tenant, or the own scopes of an agent and the agents under it; a scope whose records
    were all forgotten too, while Restate keeps its finished invocations (a remembered
    record's answer, kept for the idempotency retention)."""
    if tenant is None:
        owner = f"{parse_address(prefix).tenant}:agent:{prefix}"
        return tuple(sorted(admin.keys_with_prefix(MEMORY, owner, invoked=True)))
    return tuple(sorted(admin.keys_starting(MEMORY, f"{tenant}:", invoked=True)))


def hooks_of(admin: RestateAdminApi, tenant: str) -> tuple[str, ...]:
    """The ids of the tenant's webhooks, from their objects' state."""
    rows = admin.query(
        f"select service_key, value_utf8 from state where service_name = '{HOOKS}'"  # noqa: S608
    )
    found = []
    for row in rows:
        try:
            spec = msgspec.json.decode(str(row["value_utf8"]), type=HookSpec)
        except (msgspec.DecodeError, TypeError, ValueError):
            continue
        if spec.tenant == tenant:
            found.append(str(row["service_key"]))
    return tuple(sorted(found))


def ledger_key(idempotency_key: str) -> str:
    """The `Effects` object's key of a call (`services.effects.ledger.ledger_key`)."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


def targets_of(found: ErasureTargets, tenant: str | None) -> list[Target]:
    objects = [Target(service, agent) for agent in found.agents for service in PER_AGENT]
    objects += [Target(EFFECTS, key) for key in found.effects]
    objects += [Target(HOOKS, hook) for hook in found.hooks]
    objects += [Target(MEMORY, key) for key in found.memories]
    if tenant is not None:
        objects += [Target(service, tenant) for service in PER_TENANT if service != LIFECYCLE]
    return objects
