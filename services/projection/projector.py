"""The `Projector` service: the one writer of the projections.

Agents send it every timeline event, tenants every spec and key change, one-way; each
write is an upsert, so Restate's at-least-once redelivery is harmless. `rebuild` throws
the file away and reads everything back from the source of truth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import restate

from schemas.catalog import ApiKey, EventBatch, PublishedSpec, RebuildReport
from services.contracts import PROJECT_EVENTS, PROJECT_KEY, PROJECT_SPEC, PROJECTOR, REBUILD
from services.projection.rebuild import rebuild_from_restate
from services.projection.store import ProjectionStore

T = TypeVar("T")


class Projection:
    """The store of this process, opened on first use; writes take turns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store: ProjectionStore | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def write(self, action: Callable[[ProjectionStore], Awaitable[T]]) -> T:
        async with self._lock:
            store = self._store
            if store is None or not await asyncio.to_thread(self.path.exists):
                store = await self._reopen()
            return await action(store)

    async def replace(self, fill: Callable[[ProjectionStore], Awaitable[T]]) -> T:
        """Start from an empty file and fill it while every other write waits."""
        async with self._lock:
            await self._close_store()
            await asyncio.to_thread(_remove, self.path)
            return await fill(await self._reopen())

    async def _reopen(self) -> ProjectionStore:
        await self._close_store()
        if self._closed:
            raise ProjectionClosedError("the projection is closed: this process is stopping")
        self._store = await ProjectionStore.open(self.path)
        return self._store

    async def _close_store(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None

    async def close(self) -> None:
        """For good: a write after this fails, and Restate retries it elsewhere or later."""
        async with self._lock:
            self._closed = True
            await self._close_store()


class ProjectionClosedError(RuntimeError):
    pass


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def projector_service(
    projection: Projection, ingress_url: str, admin_url: str
) -> restate.VirtualObject:
    """Keyed by agent (events) or tenant (specs, keys): Restate delivers one key's sends
    in the order they were made, so one agent's batches are written in seq order."""
    projector = restate.VirtualObject(
        PROJECTOR, description="Writes the SQLite projections.", state_preload=False
    )

    @projector.handler(name=PROJECT_EVENTS.name)
    async def events(ctx: restate.ObjectContext, batch: EventBatch) -> None:
        await projection.write(lambda store: store.record_events(batch.events))

    @projector.handler(name=PROJECT_SPEC.name)
    async def spec(ctx: restate.ObjectContext, published: PublishedSpec) -> None:
        await projection.write(lambda store: store.record_spec(published))

    @projector.handler(name=PROJECT_KEY.name)
    async def key(ctx: restate.ObjectContext, key: ApiKey) -> None:
        await projection.write(lambda store: store.record_key(key))

    @projector.handler(name=REBUILD.name)
    async def rebuild(ctx: restate.ObjectContext) -> RebuildReport:
        async def run() -> RebuildReport:
            return await projection.replace(
                lambda store: rebuild_from_restate(store, ingress_url, admin_url)
            )

        return await ctx.run_typed("rebuild", run, restate.RunOptions(type_hint=RebuildReport))

    return projector
