"""The effect ledger: makes a side-effecting tool call happen at most once per key.

A journaled step that was interrupted by a crash runs again from scratch. Before a
side-effecting tool runs, its key is marked as started here; a second attempt that finds
the mark knows the first one may or may not have done its work, and reports that instead
of running the tool again. A finished call's result is kept, so a retry returns it.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_SCHEMA = """
create table if not exists effects (
    key text primary key,
    state text not null check (state in ('started', 'finished')),
    status text,
    content text
)
"""


@dataclass(frozen=True)
class Prior:
    state: Literal["started", "finished"]
    status: str | None
    content: str | None


class EffectLedger:
    def __init__(self, path: Path) -> None:
        self._path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            db.execute("pragma journal_mode=wal")
            db.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=30, isolation_level=None)

    def begin(self, key: str) -> Prior | None:
        """Mark `key` as started; return what an earlier attempt left, if anything."""
        with closing(self._connect()) as db:
            db.execute("begin immediate")
            row = db.execute(
                "select state, status, content from effects where key = ?", (key,)
            ).fetchone()
            if row is None:
                db.execute("insert into effects (key, state) values (?, 'started')", (key,))
            db.execute("commit")
        return None if row is None else Prior(*row)

    def finish(self, key: str, status: str, content: str) -> None:
        with closing(self._connect()) as db:
            db.execute(
                "update effects set state = 'finished', status = ?, content = ? where key = ?",
                (status, content, key),
            )
