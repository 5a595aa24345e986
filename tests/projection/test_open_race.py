"""Two writers opening one fresh SQLite projection at once (two control-plane replicas on
one home): both come up, the migrations run once, and neither holds the write lock after."""

from __future__ import annotations

import asyncio
from pathlib import Path

from services.projection.migrations import MIGRATIONS
from services.projection.store import ProjectionStore


def test_two_writers_opening_a_fresh_file_at_once_both_come_up(tmp_path: Path) -> None:
    """Each writer opens it on a thread of its own (aiosqlite's), so the two migrations
    really race."""
    for n in range(20):
        asyncio.run(_open_twice(tmp_path / f"projection-{n}.db"))


async def _open_twice(path: Path) -> None:
    first, second = await asyncio.gather(ProjectionStore.open(path), ProjectionStore.open(path))
    try:
        for store in (first, second):
            rows = await store._db.execute_fetchall("select version from migrations")
            assert [r[0] for r in rows] == list(range(1, len(MIGRATIONS) + 1))
            await store._db.execute("insert into migrations values (-1)")  # a write: no lock held
            await store._db.execute("delete from migrations where version = -1")
            await store._db.commit()
    finally:
        await first.close()
        await second.close()
