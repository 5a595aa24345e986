"""The PostgreSQL store's memory and knowledge indexes: the same tables and upserts as
SQLite's (`memories.py`, `knowledge.py`), searched with `tsvector`/`tsquery` instead of
FTS5.

The tenant and the scopes (memories), the tenant and the document's status (knowledge)
are conditions of the query that ranks: only the rows that pass them are matched and
ranked, so a record outside them is never among the results, whatever its rank would have
been. A query's words are the ones SQLite searches for (stopwords left out unless there
is nothing else, at most `MAX_TERMS`), any of them, each taken as a word and never as an
operator. They are ordered by `ts_rank` divided by the row's length (normalization 2), as
BM25 favours the shorter of two rows holding the same words; it weighs a row's own words
only, and no score is given out, as SQLite's gives none.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Sequence
from datetime import datetime
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import AsyncConnection

from schemas.knowledge import Document, DocumentSearch, IndexedDocument, Passage, PassageHit
from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from services.projection.embeddings import QueryVector
from services.projection.hybrid import CANDIDATES, fuse, nearest
from services.projection.knowledge import MAX_LISTED
from services.projection.memories import MAX_TERMS, STOPWORDS, limit_of, record_rows

Db = AsyncConnection[tuple[Any, ...]]
Statements = list[tuple[LiteralString, Sequence[tuple[Any, ...]]]]
_WORD = re.compile(r"\w+")
T = TypeVar("T")

INSERT_MEMORY = """
insert into memories (id, tenant, scope, owner, kind, at, text)
values (%s, %s, %s, %s, %s, %s, %s) on conflict (id) do nothing
"""
DELETE_MEMORY = "delete from memories where tenant = %s and id = %s"
DELETE_SCOPE = "delete from memories where tenant = %s and scope = %s and owner = %s"
UPSERT_DOCUMENT = """
insert into documents
    (id, tenant, title, format, sha256, chars, status, uploaded_at, released_at, passages)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
on conflict (id) do update set
    status = excluded.status, released_at = excluded.released_at, passages = excluded.passages
where excluded.status = 'released' or documents.status = 'draft'
"""
"""A document's record; a released one is never taken back to a draft by a late write."""
CLEAR_PASSAGES = "delete from passages where tenant = %s and document = %s"
INSERT_PASSAGE = """
insert into passages (document, tenant, n, start, section, text, page)
values (%s, %s, %s, %s, %s, %s, %s)
"""
DELETE_DOCUMENT = "delete from documents where tenant = %s and id = %s"
_MEMORY = "m.id, m.tenant, m.scope, m.owner, m.kind, m.at, m.text"
_DOCUMENT = (
    "d.id, d.tenant, d.title, d.format, d.sha256, d.chars, d.status, d.uploaded_at,"
    " d.released_at, d.passages"
)


def memory_rows(records: Sequence[MemoryRecord]) -> list[tuple[Any, ...]]:
    return record_rows(records)


def query_words(query: str) -> list[str]:
    """The words searched for: those of `memories.match_expression`, unquoted."""
    words = _WORD.findall(query.casefold())
    telling = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(telling[:MAX_TERMS]))


def _tsquery(words: Sequence[str]) -> str:
    """A tsquery matching any of the words (each parsed as plain text, so nothing in it
    is an operator)."""
    return " || ".join("plainto_tsquery('simple', %s)" for _ in words)


Query = tuple[str, tuple[object, ...]]


def _within(search: MemorySearch) -> tuple[str, list[object]] | None:
    scopes = search.scopes
    if not scopes or len({s.tenant for s in scopes}) != 1:
        return None
    each = " or ".join("(m.scope = %s and m.owner = %s)" for _ in scopes)
    args: list[object] = [scopes[0].tenant]
    for scope in scopes:
        args += [scope.kind, scope.owner]
    return f"m.tenant = %s and ({each})", args


def memory_query(search: MemorySearch, limit: int = 0) -> Query | None:
    """The query that ranks `search`'s words within its scopes, and its arguments; None
    when it can find nothing (no words, no scopes, scopes of more than one tenant)."""
    words, scoped = query_words(search.query), _within(search)
    if not words or scoped is None:
        return None
    statement = (
        f"select {_MEMORY}"  # noqa: S608 - placeholders
        f" from memories m, (select {_tsquery(words)}) as q (q)"
        f" where m.words @@ q.q and {scoped[0]}"
        " order by ts_rank(m.words, q.q, 2) desc, m.id limit %s"
    )
    return statement, (*words, *scoped[1], limit or limit_of(search))


Plan = Generator[Query, list[tuple[Any, ...]], list[T]]
"""A search as the queries it makes, each sent the rows its query found (sans I/O: the
same plan runs on an async connection and on one of a tool step's thread)."""


def memory_plan(search: MemorySearch, query: QueryVector | None) -> Plan[MemoryHit]:
    """As `memories.ranked`: BM25's order, or its fusion with the vector list, both of rows
    within the search's tenant and scopes only."""
    vector = query.vector if query is not None else None
    bm25 = memory_query(search, CANDIDATES if vector else 0)
    rows = (yield bm25) if bm25 else []
    scoped = _within(search)
    if query is None or vector is None or scoped is None:
        return [MemoryHit(_record(row)) for row in rows]
    condition, args = scoped
    candidates = yield (
        f"select m.id, m.vector from memories m where {condition}"  # noqa: S608 - placeholders
        " and m.vector_model = %s and m.vector is not null",
        (*args, query.model),
    )
    near = nearest(vector, [(str(r[0]), bytes(r[1])) for r in candidates])
    order = fuse([str(r[0]) for r in rows], near, limit_of(search))
    found = {str(r[0]): r for r in rows}
    missing = [id_ for id_ in order if id_ not in found]
    if missing:
        more = yield (
            f"select {_MEMORY} from memories m where {condition} and m.id = any(%s)",  # noqa: S608
            (*args, missing),
        )
        found.update({str(r[0]): r for r in more})
    return [MemoryHit(_record(found[id_])) for id_ in order if id_ in found]


async def memories(
    db: Db, search: MemorySearch, query: QueryVector | None = None
) -> list[MemoryHit]:
    return await _drive(db, memory_plan(search, query))


def memories_now(
    url: str, search: MemorySearch, query: QueryVector | None = None
) -> list[MemoryHit]:
    """`memories` on a read-only connection of its own, in this thread (a tool's step)."""
    return _drive_now(url, memory_plan(search, query))


async def listed_memories(db: Db, scope: MemoryScope, limit: int) -> list[MemoryRecord]:
    rows = await _all(
        db,
        f"select {_MEMORY} from memories m where m.tenant = %s and m.scope = %s"  # noqa: S608 - placeholders
        " and m.owner = %s order by m.at desc, m.id limit %s",
        scope.tenant, scope.kind, scope.owner, limit,
    )  # fmt: skip
    return [_record(row) for row in rows]


def recorded(indexed: IndexedDocument) -> Statements:
    """As `knowledge.recorded`: the record, and (released) its passages in place of any."""
    d = indexed.document
    released = d.released_at.isoformat() if d.released_at else None
    row = (d.id, d.tenant, d.title, d.format, d.sha256, d.chars, d.status,
           d.uploaded_at.isoformat(), released, d.passages)  # fmt: skip
    statements: Statements = [(UPSERT_DOCUMENT, [row])]
    if d.status == "released":
        rows = [(d.id, d.tenant, p.n, p.start, p.section, p.text, p.page) for p in indexed.passages]
        statements += [(CLEAR_PASSAGES, [(d.tenant, d.id)]), (INSERT_PASSAGE, rows)]
    return statements


def removed(tenant: str, id_: str) -> Statements:
    return [(CLEAR_PASSAGES, [(tenant, id_)]), (DELETE_DOCUMENT, [(tenant, id_)])]


_RELEASED = "p.tenant = %s and d.tenant = p.tenant and d.status = 'released'"
_PASSAGE = "p.document, d.title, p.n, p.start, p.section, p.text, p.page"


def passage_query(search: DocumentSearch, limit: int = 0) -> Query | None:
    """The query that ranks `search`'s words in its tenant's released passages, and its
    arguments; None when it can find nothing (no words)."""
    words = query_words(search.query)
    if not words or not search.tenant:
        return None
    statement = (
        f"select {_PASSAGE}"  # noqa: S608 - placeholders
        " from passages p join documents d on d.id = p.document,"
        f" (select {_tsquery(words)}) as q (q)"
        f" where p.words @@ q.q and {_RELEASED}"
        " order by ts_rank(p.words, q.q, 2) desc, p.document, p.n limit %s"
    )
    return statement, (*words, search.tenant, limit or limit_of(search))


def passage_plan(search: DocumentSearch, query: QueryVector | None) -> Plan[PassageHit]:
    """As `knowledge.ranked`: BM25's order, or its fusion with the vector list, both of the
    tenant's released passages only."""
    vector = query.vector if query is not None and search.tenant else None
    bm25 = passage_query(search, CANDIDATES if vector else 0)
    rows = (yield bm25) if bm25 else []
    if query is None or vector is None:
        return _hits(rows)
    candidates = yield (
        "select p.document, p.n, p.vector"  # noqa: S608 - constants
        " from passages p join documents d on d.id = p.document"
        f" where {_RELEASED} and p.vector_model = %s and p.vector is not null",
        (search.tenant, query.model),
    )
    found = {(str(r[0]), int(r[2])): r for r in rows}
    near = nearest(vector, [((str(r[0]), int(r[1])), bytes(r[2])) for r in candidates])
    order = fuse(list(found), near, limit_of(search))
    missing = [key for key in order if key not in found]
    if missing:
        more = yield (
            f"select {_PASSAGE} from passages p join documents d on d.id = p.document"  # noqa: S608
            f" where {_RELEASED} and (p.document, p.n) in"
            " (select * from unnest(%s::text[], %s::bigint[]))",
            (search.tenant, [k[0] for k in missing], [k[1] for k in missing]),
        )
        found.update({(str(r[0]), int(r[2])): r for r in more})
    return _hits(found[key] for key in order if key in found)


async def passages(
    db: Db, search: DocumentSearch, query: QueryVector | None = None
) -> list[PassageHit]:
    return await _drive(db, passage_plan(search, query))


def passages_now(
    url: str, search: DocumentSearch, query: QueryVector | None = None
) -> list[PassageHit]:
    """`passages` on a read-only connection of its own, in this thread (a tool's step)."""
    return _drive_now(url, passage_plan(search, query))


async def _drive(db: Db, plan: Plan[T]) -> list[T]:
    try:
        statement = next(plan)
        while True:
            statement = plan.send(await _all(db, statement[0], *statement[1]))
    except StopIteration as done:
        return list(done.value)


def _drive_now(url: str, plan: Plan[T]) -> list[T]:
    try:
        statement = next(plan)
    except StopIteration as done:
        return list(done.value)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("set default_transaction_read_only = on")
        try:
            while True:
                statement = plan.send(db.execute(statement[0], statement[1]).fetchall())
        except StopIteration as done:
            return list(done.value)


async def listed_documents(db: Db, tenant: str, limit: int) -> list[Document]:
    rows = await _all(
        db,
        f"select {_DOCUMENT} from documents d where d.tenant = %s"  # noqa: S608 - placeholders
        " order by d.uploaded_at desc, d.id limit %s",
        tenant,
        max(min(limit, MAX_LISTED), 1),
    )
    return [_document(row) for row in rows]


async def one_document(db: Db, tenant: str, id_: str) -> Document | None:
    rows = await _all(
        db,
        f"select {_DOCUMENT} from documents d where d.tenant = %s and d.id = %s",  # noqa: S608
        tenant,
        id_,
    )
    return _document(rows[0]) if rows else None


async def _all(db: Db, statement: str, *args: object) -> list[tuple[Any, ...]]:
    cursor = await db.execute(statement, args)
    return await cursor.fetchall()


def _hits(rows: Iterable[Sequence[Any]]) -> list[PassageHit]:
    return [
        PassageHit(
            str(r[0]), str(r[1]), Passage(int(r[2]), int(r[3]), str(r[4]), str(r[5]), int(r[6]))
        )
        for r in rows
    ]


def _record(row: Sequence[Any]) -> MemoryRecord:
    scope = MemoryScope(row[1], row[2], row[3])
    return MemoryRecord(row[0], scope, row[4], row[6], datetime.fromisoformat(row[5]))


def _document(row: Sequence[Any]) -> Document:
    released = datetime.fromisoformat(row[8]) if row[8] else None
    return Document(
        row[0], row[1], row[2], row[3], row[4], int(row[5]), row[6],
        datetime.fromisoformat(row[7]), released, int(row[9]),
    )  # fmt: skip
