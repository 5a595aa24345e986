"""The memory index: records in the `memories` table, their text in an FTS5 index over
it, searched by BM25 within the scopes a caller may see (the projector's writer only
writes it; it is derived data).

The scope is a condition of the query that ranks: FTS5 ranks only the rows that match
both the words and the scopes, so a record outside them is never among the results,
whatever its rank would have been. The tenant is one of those conditions, always. The
score is not given out: BM25 weighs words by how rare they are in the whole index, which
every tenant shares.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from schemas.knowledge import DocumentSearch
from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from services.projection.embeddings import QueryVector
from services.projection.hybrid import CANDIDATES, fuse, nearest

INSERT = """
insert into memories (id, tenant, scope, owner, kind, at, text) values (?, ?, ?, ?, ?, ?, ?)
on conflict (id) do nothing
"""
DELETE = "delete from memories where tenant = ? and id = ?"
DELETE_SCOPE = "delete from memories where tenant = ? and scope = ? and owner = ?"
DELETE_TENANT = "delete from memories where tenant = ?"
_COLUMNS = "m.id, m.tenant, m.scope, m.owner, m.kind, m.at, m.text"
_WORD = re.compile(r"\w+")
T = TypeVar("T")
MAX_TERMS = 16
"""Words of a query that are searched for at most."""


def record_rows(records: Sequence[MemoryRecord]) -> list[tuple[Any, ...]]:
    return [
        (r.id, r.scope.tenant, r.scope.kind, r.scope.owner, r.kind, r.at.isoformat(), r.text)
        for r in records
    ]


STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
"""Words that say nothing of what a record is about: left out of a query that has others."""


def match_expression(query: str) -> str:
    """The query's words as an FTS5 expression: any of them, each quoted (so no word is
    read as an operator), stopwords left out unless there is nothing else; empty when the
    query has no words."""
    words = _WORD.findall(query.casefold())
    telling = [w for w in words if w not in STOPWORDS] or words
    return " OR ".join(f'"{word}"' for word in dict.fromkeys(telling[:MAX_TERMS]))


def within(search: MemorySearch) -> tuple[str, list[object]] | None:
    """The condition that keeps `search`'s tenant and scopes, and its arguments; None when
    nothing is within (no scopes, scopes of more than one tenant)."""
    scopes = search.scopes
    if not scopes or len({s.tenant for s in scopes}) != 1:
        return None
    each = " or ".join("(m.scope = ? and m.owner = ?)" for _ in scopes)
    args: list[object] = [scopes[0].tenant]
    for scope in scopes:
        args += [scope.kind, scope.owner]
    return f"m.tenant = ? and ({each})", args


def limit_of(search: MemorySearch | DocumentSearch) -> int:
    return max(min(search.limit, 50), 1)


def search_query(search: MemorySearch, limit: int = 0) -> tuple[str, tuple[object, ...]] | None:
    """The query that ranks `search`'s words within its scopes, and its arguments; None
    when it can find nothing (no words, nothing within)."""
    expression, scoped = match_expression(search.query), within(search)
    if not expression or scoped is None:
        return None
    sql = (
        f"select {_COLUMNS} from memory_text"  # noqa: S608 - placeholders
        " join memories m on m.rowid = memory_text.rowid"
        f" where memory_text match ? and {scoped[0]}"
        " order by bm25(memory_text), m.id limit ?"
    )
    return sql, (expression, *scoped[1], limit or limit_of(search))


def hits(rows: Iterable[Sequence[Any]]) -> list[MemoryHit]:
    return [MemoryHit(_record(row)) for row in rows]


def ranked(
    db: sqlite3.Connection, search: MemorySearch, query: QueryVector | None
) -> list[MemoryHit]:
    """BM25's order, or with a query vector the fusion of BM25's list and the vector list,
    both of rows within the search's tenant and scopes only."""
    bm25 = search_query(search, CANDIDATES if query and query.vector else 0)
    rows = db.execute(*bm25).fetchall() if bm25 else []
    scoped = within(search)
    if query is None or query.vector is None or scoped is None:
        return hits(rows)
    condition, args = scoped
    candidates = db.execute(
        f"select m.id, m.vector from memories m where {condition}"  # noqa: S608 - placeholders
        " and m.vector_model = ? and m.vector is not null",
        (*args, query.model),
    ).fetchall()
    order = fuse([r[0] for r in rows], nearest(query.vector, candidates), limit_of(search))
    found = {r[0]: r for r in rows}
    missing = [id_ for id_ in order if id_ not in found]
    if missing:
        marks = ", ".join("?" for _ in missing)
        more = db.execute(
            f"select {_COLUMNS} from memories m where {condition} and m.id in ({marks})",  # noqa: S608
            (*args, *missing),
        ).fetchall()
        found.update({r[0]: r for r in more})
    return hits(found[id_] for id_ in order if id_ in found)


async def search(
    db: aiosqlite.Connection, search: MemorySearch, query: QueryVector | None = None
) -> list[MemoryHit]:
    return await on_thread(db, ranked, search, query)


async def on_thread(db: aiosqlite.Connection, work: Callable[..., T], *args: object) -> T:
    """`work(connection, *args)` on the aiosqlite connection's own thread (the store's
    `_in_thread`, with a result)."""
    result: T = await db._execute(work, db._conn, *args)  # type: ignore[no-untyped-call]
    return result


def search_now(
    path: Path, search: MemorySearch, query: QueryVector | None = None
) -> list[MemoryHit]:
    """`search` on a read-only connection of its own, in this thread (a tool's step)."""
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        db.execute("pragma busy_timeout=5000")
        return ranked(db, search, query)


async def listed(db: aiosqlite.Connection, scope: MemoryScope, limit: int) -> list[MemoryRecord]:
    rows = await db.execute_fetchall(
        f"select {_COLUMNS} from memories m"  # noqa: S608 - a constant
        " where m.tenant = ? and m.scope = ? and m.owner = ? order by m.at desc, m.id limit ?",
        (scope.tenant, scope.kind, scope.owner, limit),
    )
    return [_record(row) for row in rows]


def _record(row: Sequence[Any]) -> MemoryRecord:
    scope = MemoryScope(row[1], row[2], row[3])
    return MemoryRecord(row[0], scope, row[4], row[6], datetime.fromisoformat(row[5]))
