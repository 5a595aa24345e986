"""The `Projector` service: the one writer of the projections.

Agents send it batches of timeline events, tenants every spec and key change, one-way;
each write is an upsert, so Restate's at-least-once redelivery is harmless. Agents served
by this process write their events here directly instead (`offer` as each round is
flushed, `write` at the end of a wake): the same upserts, without an invocation; `write`
hands the `Projector` only the events it could not write (`overflow`). Writes are
group-committed: invocations that arrive while a transaction is being written queue their
records, and the next transaction writes all of them, so many agents' batches cost one
commit. An invocation returns only once its records are committed. `rebuild` throws the
file away and reads everything back from the source of truth.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import restate

from schemas.events import Event
from schemas.knowledge import DocumentGone, IndexedDocument
from schemas.memory import MemoryForgotten, MemoryRecord
from schemas.projection import EventBatch, RebuildReport
from schemas.tenant import ApiKey, PublishedSpec
from services.contracts import (
    PROJECT_DOCUMENT,
    PROJECT_DOCUMENT_GONE,
    PROJECT_EVENTS,
    PROJECT_FORGOTTEN,
    PROJECT_KEY,
    PROJECT_MEMORY,
    PROJECT_SPEC,
    PROJECTOR,
    REBUILD,
)
from services.durable import NO_JOURNAL, step_options
from services.ingress import AsyncIngress
from services.observe import tracing
from services.projection import filling
from services.projection.catalog import Decided
from services.projection.erasure import Erasable
from services.projection.postgres import PostgresStore
from services.projection.rebuild import ArchivedTimelines, rebuild_from_restate
from services.projection.store import ProjectionStore
from services.projection.stores import ReadSide

T = TypeVar("T")
log = logging.getLogger("teaspill.projection")
Tell = Callable[[Mapping[str, int]], None]
"""Told, after each commit, every agent whose events it held and its newest seq there."""
Overflow = Callable[[EventBatch], Awaitable[None]]
"""Hands the `Projector` a batch the projection could not write (the `Projector` retries
it on its own); returns once the batch is durable there."""


@dataclass
class _Records:
    """One invocation's records, waiting for the transaction that writes them."""

    events: Sequence[Event] = ()
    specs: Sequence[PublishedSpec] = ()
    keys: Sequence[ApiKey] = ()
    statuses: Mapping[str, Decided] = field(default_factory=dict)
    done: asyncio.Future[None] | None = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    """None for records nobody waits for (`Projection.offer`)."""

    def settle(self, error: BaseException | None) -> None:
        if self.done is None:
            if error is not None:
                log.warning("a flushed batch was not projected (its wake will write it): %s", error)
            return
        if self.done.done():
            return  # its invocation was cancelled meanwhile; the write stands
        if error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(error)


class Projection:
    """The store of this process, opened on first use; one writer task commits what is
    queued, a group at a time. The SQLite file at `path`, or the PostgreSQL store at
    `url` when one is given."""

    def __init__(
        self,
        path: Path,
        tell: Tell | None = None,
        overflow: Overflow | None = None,
        *,
        url: str = "",
    ) -> None:
        self.path = path
        self.url = url
        self._tell = tell
        self._overflow = overflow
        self._store: ReadSide | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._queue: list[_Records] = []
        self._writer: asyncio.Task[None] | None = None
        self._held: dict[str, set[int]] = {}
        """Per agent, the seqs of offered events committed to the open file: a wake's
        last write need not write them again."""

    async def record(
        self,
        events: Sequence[Event] = (),
        specs: Sequence[PublishedSpec] = (),
        keys: Sequence[ApiKey] = (),
        statuses: Mapping[str, Decided] | None = None,
    ) -> None:
        """Queue the records; return once a transaction holding them is committed.
        `statuses`: each agent's status as the agent decided it, and the seq it holds at."""
        records = _Records(events, specs, keys, statuses or {})
        self._enqueue(records)
        assert records.done is not None
        await records.done

    def offer(self, batch: EventBatch) -> None:
        """Queue an agent's batch for the next transaction and return at once. For a
        batch that is written again before its wake ends: one that fails here is logged."""
        if not self._closed:
            self._enqueue(_Records(batch.events, statuses=decided(batch), done=None))

    async def commit(self, batch: EventBatch) -> None:
        """Return once an agent's batch is committed. Events its offers already committed
        are not written again (the last one always is: it carries the status)."""
        if not batch.events:
            return
        *rest, last = batch.events
        held = self._held.pop(last.agent, set())
        events = [*(e for e in rest if e.seq not in held), last]
        await self.record(events=events, statuses=decided(batch))

    async def write(self, batch: EventBatch) -> None:
        """A wake's last write: `commit`, or, if the batch cannot be committed and there
        is an `overflow`, the batch handed to it, so the wake does not wait for the
        projection to work again."""
        agent = batch.events[-1].agent if batch.events else ""
        attributes: tracing.Attributes = {
            "teaspill.agent": agent,
            "teaspill.events": len(batch.events),
        }
        try:
            with tracing.span("projection write", attributes=attributes):
                await self.commit(batch)
        except Exception as error:
            if self._overflow is None:
                raise
            log.warning("%s's events go to the Projector: %s", batch.events[-1].agent, error)
            await self._overflow(batch)

    def _enqueue(self, records: _Records) -> None:
        self._queue.append(records)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain(), name="projection writer")

    async def replace(self, fill: Callable[[ReadSide], Awaitable[T]]) -> T:
        """Start from an empty file (or emptied tables) and fill it while every other
        write waits."""
        async with self._lock:
            await self._close_store()
            if not self.url:
                await asyncio.to_thread(_remove, self.path)
            store = await self._reopen()
            if isinstance(store, PostgresStore):
                await store.clear()
            return await fill(store)

    async def apply(self, work: Callable[[ReadSide], Awaitable[T]]) -> T:
        """`work` on the store between two group commits (a write of its own, or a read on
        the writer's connection)."""
        async with self._lock:
            return await work(await self._current())

    async def erasable(self, prefix: str) -> Erasable:
        async with self._lock:
            return await (await self._current()).erasable(prefix)

    async def erase(self, prefix: str, *, tenant: str | None = None) -> None:
        """Delete the rows of the agents `prefix` names (and a `tenant`'s specs and keys)
        between two group commits."""
        async with self._lock:
            await (await self._current()).erase(prefix, tenant=tenant)
            self._held.clear()

    async def idle_since(self, tenant: str, before: str) -> list[str]:
        """The tenant's agents shown idle whose last event is older than `before` (an
        ISO time)."""
        found: list[str] = []
        async with self._lock:
            store, after = await self._current(), ""
            while page := await store.agents(tenant, status="idle", after=after, limit=500):
                found += [row.address for row in page if row.last_activity < before]
                after = page[-1].address
        return found

    async def mark_archived(self, address: str, *, archived: bool) -> None:
        async with self._lock:
            await (await self._current()).mark_archived(address, archived=archived)

    async def close(self) -> None:
        """For good: a write after this fails, and Restate retries it elsewhere or later."""
        async with self._lock:
            self._closed = True
            await self._close_store()

    async def _drain(self) -> None:
        while self._queue:
            group, self._queue = self._queue, []
            async with self._lock:
                committed = await self._commit(group)
            if committed and self._tell is not None:
                self._tell(_newest_seqs(group))

    async def _commit(self, group: list[_Records]) -> bool:
        """Write the group in one transaction; if that fails, each alone, so a record that
        cannot be written fails only its own invocation (which Restate retries)."""
        try:
            store = await self._current()
            await store.record(
                _once(e for r in group for e in r.events),
                [s for r in group for s in r.specs],
                [k for r in group for k in r.keys],
                newest_statuses(group),
            )
        except Exception as error:  # noqa: BLE001 - handed to the waiting invocations
            if len(group) == 1:
                group[0].settle(error)
                return False
            return any([await self._commit([records]) for records in group])
        for records in group:
            records.settle(None)
            if records.done is None:
                for event in records.events:
                    self._held.setdefault(event.agent, set()).add(event.seq)
        return True

    async def _current(self) -> ReadSide:
        store = self._store
        if store is None or (not self.url and not self.path.exists()):  # a stat, no hop
            store = await self._reopen()
        elif isinstance(store, PostgresStore) and store.broken:
            store = await self._reopen()  # its server restarted: the next write reconnects
        return store

    async def _reopen(self) -> ReadSide:
        await self._close_store()
        if self._closed:
            raise ProjectionClosedError("the projection is closed: this process is stopping")
        if self.url:
            self._store = await PostgresStore.open(self.url)
        else:
            self._store = await ProjectionStore.open(self.path)
        return self._store

    async def _close_store(self) -> None:
        self._held.clear()  # what a new file holds is not known
        if self._store is not None:
            await self._store.close()
            self._store = None


class ProjectionClosedError(RuntimeError):
    pass


def decided(batch: EventBatch) -> dict[str, Decided]:
    """The agent's status as the batch decides it, at its last event."""
    if not batch.events:
        return {}
    return {batch.events[-1].agent: Decided(batch.status, batch.events[-1].seq)}


def newest_statuses(group: Sequence[_Records]) -> dict[str, Decided]:
    """Each agent's status as decided at its highest seq in the group."""
    newest: dict[str, Decided] = {}
    for records in group:
        for agent, decided in records.statuses.items():
            if agent not in newest or decided.seq > newest[agent].seq:
                newest[agent] = decided
    return newest


def _once(events: Iterable[Event]) -> list[Event]:
    """Each (agent, seq) once: a wake's last write repeats the events it handed over as
    its steps returned, often in the same group."""
    return list({(e.agent, e.seq): e for e in events}.values())


def _newest_seqs(group: Sequence[_Records]) -> dict[str, int]:
    seqs: dict[str, int] = {}
    for records in group:
        for event in records.events:
            seqs[event.agent] = max(event.seq, seqs.get(event.agent, 0))
    return seqs


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def through_ingress(ingress: AsyncIngress) -> Overflow:
    """An overflow that sends each batch to the `Projector` through Restate's ingress: one
    way, keyed by its agent, so the batches of one agent are written in the order sent."""

    async def hand_over(batch: EventBatch) -> None:
        await ingress.send(PROJECT_EVENTS, batch, key=batch.events[-1].agent)

    return hand_over


def projector_service(
    projection: Projection,
    ingress_url: str,
    admin_url: str,
    archived: ArchivedTimelines | None = None,
) -> restate.VirtualObject:
    """Keyed by agent (events) or tenant (specs, keys): Restate delivers one key's sends
    in the order they were made, so one agent's batches are written in seq order. A
    rebuild reads archived agents' timelines from `archived`."""
    projector = restate.VirtualObject(
        PROJECTOR, description="Writes the SQLite projections.", state_preload=False
    )

    @projector.handler(name=PROJECT_EVENTS.name)
    async def events(ctx: restate.ObjectContext, batch: EventBatch) -> None:
        await projection.commit(batch)  # raises while it cannot: Restate retries it

    @projector.handler(name=PROJECT_SPEC.name)
    async def spec(ctx: restate.ObjectContext, published: PublishedSpec) -> None:
        await projection.record(specs=(published,))

    @projector.handler(name=PROJECT_KEY.name)
    async def key(ctx: restate.ObjectContext, key: ApiKey) -> None:
        await projection.record(keys=(key,))

    @projector.handler(name=PROJECT_MEMORY.name, journal_retention=NO_JOURNAL)
    async def memory(ctx: restate.ObjectContext, record: MemoryRecord) -> None:
        await projection.apply(lambda store: store.record_memories((record,)))
        filling.ask(ctx, record.scope.tenant)

    @projector.handler(name=PROJECT_FORGOTTEN.name)
    async def forgotten(ctx: restate.ObjectContext, gone: MemoryForgotten) -> None:
        if gone.everything:
            await projection.apply(lambda store: store.forget_scope(gone.scope))
        else:
            await projection.apply(lambda store: store.forget_memories(gone.scope.tenant, gone.ids))

    @projector.handler(name=REBUILD.name)
    async def rebuild(ctx: restate.ObjectContext) -> RebuildReport:
        async def run() -> RebuildReport:
            return await projection.replace(
                lambda store: rebuild_from_restate(store, ingress_url, admin_url, archived)
            )

        report = await ctx.run_typed("rebuild", run, step_options(RebuildReport))
        await filling.ask_all(ctx, projection)
        return report

    _knowledge_handlers(projector, projection)
    filling.vector_handlers(projector, projection)
    return projector


def _knowledge_handlers(projector: restate.VirtualObject, projection: Projection) -> None:
    """A tenant's documents (keyed by the tenant): recorded, or gone."""

    @projector.handler(name=PROJECT_DOCUMENT.name, journal_retention=NO_JOURNAL)
    async def document(ctx: restate.ObjectContext, indexed: IndexedDocument) -> None:
        await projection.apply(lambda store: store.record_document(indexed))
        if indexed.passages:
            filling.ask(ctx, indexed.document.tenant)

    @projector.handler(name=PROJECT_DOCUMENT_GONE.name)
    async def document_gone(ctx: restate.ObjectContext, gone: DocumentGone) -> None:
        await projection.apply(lambda store: store.forget_document(gone.tenant, gone.id))
