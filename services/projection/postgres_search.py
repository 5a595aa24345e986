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
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg
from psycopg import AsyncConnection

from schemas.knowledge import Document, DocumentSearch, IndexedDocument, Passage, PassageHit
from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from services.projection.knowledge import MAX_LISTED
from services.projection.memories import MAX_TERMS, STOPWORDS, record_rows

Db = AsyncConnection[tuple[Any, ...]]
Statements = list[tuple[LiteralString, Sequence[tuple[Any, ...]]]]
_WORD = re.compile(r"\w+")

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
insert into passages (document, tenant, n, start, section, text)
values (%s, %s, %s, %s, %s, %s)
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


def memory_query(search: MemorySearch) -> Query | None:
    """The query that ranks `search`'s words within its scopes, and its arguments; None
    when it can find nothing (no words, no scopes, scopes of more than one tenant)."""
    words, scopes = query_words(search.query), search.scopes
    if not words or not scopes or len({s.tenant for s in scopes}) != 1:
        return None
    within = " or ".join("(m.scope = %s and m.owner = %s)" for _ in scopes)
    args: list[object] = [*words, scopes[0].tenant]
    for scope in scopes:
        args += [scope.kind, scope.owner]
    statement = (
        f"select {_MEMORY}"  # noqa: S608 - placeholders
        f" from memories m, (select {_tsquery(words)}) as q (q)"
        f" where m.words @@ q.q and m.tenant = %s and ({within})"
        " order by ts_rank(m.words, q.q, 2) desc, m.id limit %s"
    )
    return statement, (*args, max(min(search.limit, 50), 1))


async def memories(db: Db, search: MemorySearch) -> list[MemoryHit]:
    query = memory_query(search)
    return [MemoryHit(_record(row)) for row in await _all(db, query[0], *query[1])] if query else []


def memories_now(url: str, search: MemorySearch) -> list[MemoryHit]:
    """`memories` on a read-only connection of its own, in this thread (a tool's step)."""
    query = memory_query(search)
    return [MemoryHit(_record(row)) for row in _now(url, query)] if query else []


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
        rows = [(d.id, d.tenant, p.n, p.start, p.section, p.text) for p in indexed.passages]
        statements += [(CLEAR_PASSAGES, [(d.tenant, d.id)]), (INSERT_PASSAGE, rows)]
    return statements


def removed(tenant: str, id_: str) -> Statements:
    return [(CLEAR_PASSAGES, [(tenant, id_)]), (DELETE_DOCUMENT, [(tenant, id_)])]


def passage_query(search: DocumentSearch) -> Query | None:
    """The query that ranks `search`'s words in its tenant's released passages, and its
    arguments; None when it can find nothing (no words)."""
    words = query_words(search.query)
    if not words or not search.tenant:
        return None
    statement = (
        "select p.document, d.title, p.n, p.start, p.section, p.text"  # noqa: S608 - placeholders
        " from passages p join documents d on d.id = p.document,"
        f" (select {_tsquery(words)}) as q (q)"
        " where p.words @@ q.q and p.tenant = %s and d.tenant = p.tenant"
        " and d.status = 'released'"
        " order by ts_rank(p.words, q.q, 2) desc, p.document, p.n limit %s"
    )
    return statement, (*words, search.tenant, max(min(search.limit, 50), 1))


async def passages(db: Db, search: DocumentSearch) -> list[PassageHit]:
    query = passage_query(search)
    return _hits(await _all(db, query[0], *query[1])) if query else []


def passages_now(url: str, search: DocumentSearch) -> list[PassageHit]:
    """`passages` on a read-only connection of its own, in this thread (a tool's step)."""
    query = passage_query(search)
    return _hits(_now(url, query)) if query else []


def _now(url: str, query: Query) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("set default_transaction_read_only = on")
        return db.execute(query[0], query[1]).fetchall()


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
        PassageHit(str(r[0]), str(r[1]), Passage(int(r[2]), int(r[3]), str(r[4]), str(r[5])))
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
