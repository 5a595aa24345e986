"""The knowledge index: documents' records in `documents` (drafts too), the passages of
released ones in `passages`, their text in an FTS5 index over it, searched by BM25 within
one tenant (the projector's writer only writes it; it is derived data).

The tenant and the document's status are conditions of the query that ranks, so a
passage of another tenant's document, or of a draft, is never among the results. The
score is not given out: BM25 weighs words by how rare they are in the whole index, which
every tenant shares.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from schemas.knowledge import Document, DocumentSearch, IndexedDocument, Passage, PassageHit
from services.projection.embeddings import QueryVector
from services.projection.hybrid import CANDIDATES, fuse, nearest
from services.projection.memories import limit_of, match_expression, on_thread

Statements = list[tuple[str, Sequence[tuple[Any, ...]]]]

UPSERT = """
insert into documents
    (id, tenant, title, format, sha256, chars, status, uploaded_at, released_at, passages)
values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
on conflict (id) do update set
    status = excluded.status, released_at = excluded.released_at, passages = excluded.passages
where excluded.status = 'released' or documents.status = 'draft'
"""
"""A document's record; a released one is never taken back to a draft by a late write."""
CLEAR_PASSAGES = "delete from passages where tenant = ? and document = ?"
INSERT_PASSAGE = """
insert into passages (document, tenant, n, start, section, text, page)
values (?, ?, ?, ?, ?, ?, ?)
"""
DELETE = "delete from documents where tenant = ? and id = ?"
DELETE_TENANT = ("delete from passages where tenant = ?", "delete from documents where tenant = ?")
OPTIMIZE = "insert into passage_text (passage_text) values ('optimize')"
_COLUMNS = (
    "d.id, d.tenant, d.title, d.format, d.sha256, d.chars, d.status, d.uploaded_at,"
    " d.released_at, d.passages"
)
MAX_LISTED = 1_000


def recorded(indexed: IndexedDocument) -> Statements:
    """The statements that record `indexed`: its record, and (released) its passages in
    place of any it had."""
    d = indexed.document
    released = d.released_at.isoformat() if d.released_at else None
    row = (d.id, d.tenant, d.title, d.format, d.sha256, d.chars, d.status,
           d.uploaded_at.isoformat(), released, d.passages)  # fmt: skip
    statements: Statements = [(UPSERT, [row])]
    if d.status == "released":
        rows = [(d.id, d.tenant, p.n, p.start, p.section, p.text, p.page) for p in indexed.passages]
        statements += [(CLEAR_PASSAGES, [(d.tenant, d.id)]), (INSERT_PASSAGE, rows)]
    return statements


def removed(tenant: str, id_: str) -> Statements:
    return [(CLEAR_PASSAGES, [(tenant, id_)]), (DELETE, [(tenant, id_)])]


_RELEASED = "p.tenant = ? and d.tenant = p.tenant and d.status = 'released'"
"""The condition every passage a search ranks passes: its tenant's, of a released document."""
_PASSAGE = "p.document, d.title, p.n, p.start, p.section, p.text, p.page"


def search_query(search: DocumentSearch, limit: int = 0) -> tuple[str, tuple[object, ...]] | None:
    """The query that ranks `search`'s words in its tenant's released passages, and its
    arguments; None when it can find nothing (no words)."""
    expression = match_expression(search.query)
    if not expression or not search.tenant:
        return None
    sql = (
        f"select {_PASSAGE}"  # noqa: S608 - constants
        " from passage_text join passages p on p.rowid = passage_text.rowid"
        " join documents d on d.id = p.document"
        f" where passage_text match ? and {_RELEASED}"
        " order by bm25(passage_text), p.document, p.n limit ?"
    )
    return sql, (expression, search.tenant, limit or limit_of(search))


def hits(rows: Iterable[Sequence[Any]]) -> list[PassageHit]:
    return [
        PassageHit(
            str(r[0]), str(r[1]), Passage(int(r[2]), int(r[3]), str(r[4]), str(r[5]), int(r[6]))
        )
        for r in rows
    ]


def ranked(
    db: sqlite3.Connection, search: DocumentSearch, query: QueryVector | None
) -> list[PassageHit]:
    """BM25's order, or with a query vector the fusion of BM25's list and the vector list,
    both of the tenant's released passages only."""
    hybrid = query is not None and query.vector is not None and bool(search.tenant)
    bm25 = search_query(search, CANDIDATES if hybrid else 0)
    rows = db.execute(*bm25).fetchall() if bm25 else []
    if query is None or query.vector is None or not search.tenant:
        return hits(rows)
    candidates = db.execute(
        "select p.document, p.n, p.vector from passages p join documents d on d.id = p.document"  # noqa: S608
        f" where {_RELEASED} and p.vector_model = ? and p.vector is not null",
        (search.tenant, query.model),
    ).fetchall()
    found = {(str(r[0]), int(r[2])): r for r in rows}
    near = nearest(query.vector, [((str(r[0]), int(r[1])), r[2]) for r in candidates])
    order = fuse(list(found), near, limit_of(search))
    missing = [key for key in order if key not in found]
    if missing:
        each = " or ".join("(p.document = ? and p.n = ?)" for _ in missing)
        more = db.execute(
            f"select {_PASSAGE} from passages p join documents d on d.id = p.document"  # noqa: S608
            f" where {_RELEASED} and ({each})",
            (search.tenant, *(part for key in missing for part in key)),
        ).fetchall()
        found.update({(str(r[0]), int(r[2])): r for r in more})
    return hits(found[key] for key in order if key in found)


async def search(
    db: aiosqlite.Connection, search: DocumentSearch, query: QueryVector | None = None
) -> list[PassageHit]:
    return await on_thread(db, ranked, search, query)


def search_now(
    path: Path, search: DocumentSearch, query: QueryVector | None = None
) -> list[PassageHit]:
    """`search` on a read-only connection of its own, in this thread (a tool's step)."""
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        db.execute("pragma busy_timeout=5000")
        return ranked(db, search, query)


async def listed(db: aiosqlite.Connection, tenant: str, limit: int) -> list[Document]:
    rows = await db.execute_fetchall(
        f"select {_COLUMNS} from documents d where d.tenant = ?"  # noqa: S608 - a constant
        " order by d.uploaded_at desc, d.id limit ?",
        (tenant, max(min(limit, MAX_LISTED), 1)),
    )
    return [_document(row) for row in rows]


async def one(db: aiosqlite.Connection, tenant: str, id_: str) -> Document | None:
    rows = list(
        await db.execute_fetchall(
            f"select {_COLUMNS} from documents d where d.tenant = ? and d.id = ?",  # noqa: S608
            (tenant, id_),
        )
    )
    return _document(rows[0]) if rows else None


def _document(row: Sequence[Any]) -> Document:
    released = datetime.fromisoformat(row[8]) if row[8] else None
    return Document(
        row[0], row[1], row[2], row[3], row[4], int(row[5]), row[6],
        datetime.fromisoformat(row[7]), released, int(row[9]),
    )  # fmt: skip
