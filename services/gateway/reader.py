"""The gateway's read-only view of the projection: `$TEASPILL_HOME/projection.db`, or the
PostgreSQL store at `TEASPILL_PROJECTION_URL`.

The projector in the endpoint process is the one writer. The file may not exist yet when
the gateway starts, and `projections rebuild` replaces it, so connections are opened on
first use, replaced when the file is, and a read that cannot run is answered 503 instead
of failing the process.

Reads go through a pool of `connections` read-only connections, each with a thread of
its own, so one slow read (a metrics scrape, a long catch-up) holds one connection, not
every reader behind it. On PostgreSQL each connection is a read-only session, and there is
no file to be replaced (a rebuild empties the tables in one transaction). The gateway
keeps a second reader of its own for key lookups (`keycache.py`), so authentication never
waits behind a read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aiosqlite
import psycopg

from services.gateway.errors import ApiError
from services.projection.store import ProjectionStore
from services.projection.stores import ReadSide, is_postgres, open_store

T = TypeVar("T")
log = logging.getLogger(__name__)
RECHECK_SECONDS = 0.5
"""How often a read checks whether the file was replaced (a rebuild)."""


class ProjectionUnavailableError(ApiError):
    def __init__(self, reason: str) -> None:
        super().__init__(503, f"the projection cannot be read right now ({reason}); retry soon")


@dataclass(frozen=True)
class _Open:
    store: ReadSide
    identity: tuple[int, int]


_SHARED = (0, 0)
"""The identity of a PostgreSQL store: one database, never replaced under its readers."""


class ProjectionReader:
    def __init__(self, path: Path, connections: int = 1, url: str = "") -> None:
        self.path = path
        self.url = url
        self.connections = connections
        self._idle: list[_Open] = []
        self._slots = asyncio.Semaphore(connections)
        self._identity: tuple[int, int] | None = None
        self._checked = float("-inf")
        self._closed = False

    async def read(self, action: Callable[[ReadSide], Awaitable[T]]) -> T:
        """Run one typed read; raises `ProjectionUnavailableError` (503) when it cannot."""
        return await self._with(lambda current: action(current.store))

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for current in idle:
            await current.store.close()

    async def _with(self, work: Callable[[_Open], Awaitable[T]]) -> T:
        async with self._slots:
            current = await self._take()
            try:
                result = await work(current)
            except (sqlite3.Error, psycopg.Error, ValueError) as error:
                # ValueError: aiosqlite's answer when its connection was closed under it.
                await current.store.close()
                raise _unavailable(error) from error
            except BaseException:
                await self._give(current)
                raise
            await self._give(current)
            return result

    async def _take(self) -> _Open:
        """An idle connection to the file as it is now, or a new one."""
        identity = self._current_identity()
        while self._idle:
            current = self._idle.pop()
            if current.identity == identity:
                return current
            await current.store.close()
        current = await (_connect_shared(self.url) if self.url else _connect(self.path))
        self._identity, self._checked = current.identity, time.monotonic()
        return current

    async def _give(self, current: _Open) -> None:
        if self._closed or current.identity != self._identity:
            await current.store.close()
        else:
            self._idle.append(current)

    def _current_identity(self) -> tuple[int, int] | None:
        if self.url:
            return _SHARED
        now = time.monotonic()
        if now - self._checked >= RECHECK_SECONDS:
            self._identity, self._checked = _identity(self.path), now
        return self._identity


async def _connect(path: Path) -> _Open:
    identity = _identity(path)
    if identity is None:
        raise ProjectionUnavailableError(f"{path} does not exist yet")
    try:
        db = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True)
        await db.execute("pragma busy_timeout=5000")
    except sqlite3.Error as error:
        raise ProjectionUnavailableError(str(error)) from error
    return _Open(ProjectionStore(db, path), identity)


async def _connect_shared(url: str) -> _Open:
    if not is_postgres(url):
        raise ProjectionUnavailableError("TEASPILL_PROJECTION_URL is not a PostgreSQL URL")
    try:
        store = await open_store(url, Path(), readonly=True)
    except psycopg.Error as error:
        raise _unavailable(error) from error
    return _Open(store, _SHARED)


def _unavailable(error: Exception) -> ProjectionUnavailableError:
    """A 503 that names what failed; PostgreSQL's own message (its host, user and
    database) goes to the log, not to the caller."""
    if not isinstance(error, psycopg.Error):
        return ProjectionUnavailableError(str(error))
    log.warning("the PostgreSQL projection cannot be read: %s", str(error).strip())
    if isinstance(error, psycopg.errors.UndefinedTable):
        return ProjectionUnavailableError("its tables are not made yet")
    return ProjectionUnavailableError(f"PostgreSQL answered {type(error).__name__}")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)  # noqa: PTH116 - one syscall per check, no Path round trip
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino
