"""The gateway's read-only view of the projection (`$TEASPILL_HOME/projection.db`).

The projector in the endpoint process is the one writer. The file may not exist yet when
the gateway starts, and `projections rebuild` replaces it, so the connection is opened on
first use, reopened when the file is replaced, and a read that cannot run is answered
503 instead of failing the process.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from services.gateway.errors import ApiError
from services.projection.store import ProjectionStore

T = TypeVar("T")
RECHECK_SECONDS = 0.5
"""How often a read checks whether the file was replaced (a rebuild)."""


class ProjectionUnavailableError(ApiError):
    def __init__(self, reason: str) -> None:
        super().__init__(503, f"the projection cannot be read right now ({reason}); retry soon")


@dataclass(frozen=True)
class _Open:
    db: aiosqlite.Connection
    store: ProjectionStore
    identity: tuple[int, int]


class ProjectionReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._open: _Open | None = None
        self._checked = 0.0
        self._stale = False
        self._lock = asyncio.Lock()

    async def read(self, action: Callable[[ProjectionStore], Awaitable[T]]) -> T:
        """Run one typed read; raises `ProjectionUnavailableError` (503) when it cannot."""
        current = await self._current()
        return await self._guard(action(current.store))

    async def rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        """An aggregate query the typed store does not offer (metrics)."""
        current = await self._current()
        return await self._guard(_fetch(current.db, sql, args))

    async def close(self) -> None:
        async with self._lock:
            await self._drop()

    async def _guard(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except (sqlite3.Error, ValueError) as error:
            # ValueError: aiosqlite's answer when a concurrent reopen closed the connection.
            self._stale = True
            raise ProjectionUnavailableError(str(error)) from error

    async def _current(self) -> _Open:
        async with self._lock:
            if self._open is not None and not self._stale and not self._replaced():
                return self._open
            await self._drop()
            self._open = await _connect(self.path)
            self._checked = time.monotonic()
            return self._open

    def _replaced(self) -> bool:
        now = time.monotonic()
        if now - self._checked < RECHECK_SECONDS or self._open is None:
            return False
        self._checked = now
        return _identity(self.path) != self._open.identity

    async def _drop(self) -> None:
        current, self._open, self._stale = self._open, None, False
        if current is not None:
            await current.db.close()


async def _connect(path: Path) -> _Open:
    identity = _identity(path)
    if identity is None:
        raise ProjectionUnavailableError(f"{path} does not exist yet")
    try:
        db = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise ProjectionUnavailableError(str(error)) from error
    await db.execute("pragma busy_timeout=5000")
    return _Open(db, ProjectionStore(db, path), identity)


async def _fetch(db: aiosqlite.Connection, sql: str, args: tuple[object, ...]) -> list[Any]:
    cursor = await db.execute(sql, args)
    return [tuple(row) for row in await cursor.fetchall()]


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)  # noqa: PTH116 - one syscall per check, no Path round trip
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino
