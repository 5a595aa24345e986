"""The projection store: SQLite in WAL mode, written by one connection.

Every write is an upsert keyed by what it records, so duplicated and reordered input
leaves the same tables: an agent's catalog row is merged with what a batch's events say
about it, each field kept from the event with the highest seq that decides it
(`catalog.py`), never incremented.

WAL with `synchronous=NORMAL`: a commit reaches the WAL file but is not fsynced until the
next checkpoint. A killed process loses nothing (the WAL is in the OS's page cache); a
power loss or OS crash may lose the last commits, which Restate already counts as
delivered. The projection is derived data, so that case is repaired by
`teaspill projections rebuild`. In exchange a commit costs no fsync, and each commit is on
the path from an agent's append to its followers (`python -m bench.commits` times one).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import msgspec

from schemas.events import (
    BODY_TAGS,
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    PageCallClaimed,
)
from schemas.knowledge import Document, DocumentSearch, IndexedDocument, PassageHit
from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from schemas.questions import Question
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, PublishedSpec
from services.projection import knowledge, memories, tallies, vectors
from services.projection.catalog import Decided, catalog_rows
from services.projection.embeddings import QueryVector
from services.projection.erasure import Erasable, Statements, erasable, erase, securely
from services.projection.migrations import MIGRATIONS
from services.projection.vectors import Unembedded

QUEUE_WINDOW = 2000
"""The newest events of an agent its queue is counted over (`queued`)."""
_AGENT = "address, tenant, kind, spec_version, status, turn, last_seq, last_outcome, last_activity"
_UPSERT_AGENT = """
insert into agents (address, tenant, kind, spec_version, started_seq, status, status_seq,
    last_outcome, ended_seq, turn, last_seq, last_activity)
values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
on conflict (address) do update set
    kind = case when excluded.started_seq > agents.started_seq
        then excluded.kind else agents.kind end,
    spec_version = case when excluded.started_seq > agents.started_seq
        then excluded.spec_version else agents.spec_version end,
    started_seq = max(agents.started_seq, excluded.started_seq),
    status = case when excluded.status_seq > agents.status_seq
        then excluded.status else agents.status end,
    status_seq = max(agents.status_seq, excluded.status_seq),
    last_outcome = case when excluded.ended_seq > agents.ended_seq
        then excluded.last_outcome else agents.last_outcome end,
    ended_seq = max(agents.ended_seq, excluded.ended_seq),
    turn = max(agents.turn, excluded.turn),
    last_seq = max(agents.last_seq, excluded.last_seq),
    last_activity = max(agents.last_activity, excluded.last_activity)
"""
"""The catalog's merge (`catalog.py`): each field decided by an event keeps the value
decided at the higher seq (every right-hand side reads the row as it was before the
update)."""

_INSERT_EVENTS = (
    "insert into events (agent, seq, turn, type, at, event) values (?, ?, ?, ?, ?, ?)"
    " on conflict (agent, seq) do nothing"
)
_ENCODER = msgspec.json.Encoder()
_KEY_COLUMNS = "id, tenant, scope, hash, created_at, revoked_at, name, origins, kinds"

_INSERT_SPECS = (
    "insert into specs (tenant, kind, version, spec, published_at) values (?, ?, ?, ?, ?)"
    " on conflict do nothing"
)
_UPSERT_KEYS = (
    "insert into keys (id, tenant, scope, hash, created_at, revoked_at, name, origins, kinds)"
    " values (?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (id) do update set"
    " revoked_at = coalesce(keys.revoked_at, excluded.revoked_at)"
)


@dataclass(frozen=True)
class AgentRow:
    address: str
    tenant: str
    kind: str
    spec_version: int
    status: str
    turn: int
    last_seq: int
    last_outcome: str | None
    last_activity: str


@dataclass(frozen=True)
class Page:
    events: list[Event]
    full: bool
    """Whether the read stopped at its limit or its bytes, so more may follow at once (not
    at the newest event, nor at one not written yet)."""


@dataclass(frozen=True)
class ApprovalRow:
    turn: int
    answered: bool
    turn_ended: bool
    questions: dict[str, Question] = field(default_factory=dict)
    """What the call asks the person, when it asks (`approval_requested`'s questions)."""
    asked: ApprovalRequested | None = None
    claimed: str = ""
    """For a call that runs in the page: the page that claimed it, once the timeline shows
    it (`page_call_claimed`)."""


MIGRATION_WAIT_MS = 60_000
"""How long a writer opening the file waits for another's migrations to finish."""


class ProjectionStore:
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path

    @classmethod
    async def open(cls, path: Path, *, readonly: bool = False) -> ProjectionStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        if readonly:
            db = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True)
        else:
            db = await aiosqlite.connect(path)
            await db.execute(f"pragma busy_timeout={MIGRATION_WAIT_MS}")
            await _write_ahead(db)
            await db.execute("pragma synchronous=normal")
            await _migrate(db)
        await db.execute("pragma busy_timeout=5000")
        return cls(db, path)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> ProjectionStore:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- writes (the projector only) -------------------------------------------------

    async def record(
        self,
        events: Sequence[Event] = (),
        specs: Sequence[PublishedSpec] = (),
        keys: Sequence[ApiKey] = (),
        statuses: Mapping[str, Decided] | None = None,
    ) -> None:
        """Everything given, in one transaction: all of it is recorded, or none.
        `statuses`: agents' statuses as they decided them (see `catalog.Decided`)."""
        statements: list[tuple[str, Sequence[tuple[Any, ...]]]] = []
        if events:
            statements.append((_INSERT_EVENTS, _event_rows(events)))
            statements.append((_UPSERT_AGENT, catalog_rows(events, statuses)))
        if specs:
            statements.append((_INSERT_SPECS, _spec_rows(specs)))
        if keys:
            statements.append((_UPSERT_KEYS, _key_rows(keys)))
        if statements:
            await self._in_thread(_transaction, statements)

    async def _in_thread(self, work: Callable[..., None], *args: object) -> None:
        """`work(connection, *args)` on the connection's thread: one hop for a whole
        transaction (a hop per statement costs more than the statements when a
        transaction holds a few events). aiosqlite has no public call for this; its own
        methods use `_execute`, and the version is pinned (pyproject.toml)."""
        db = self._db
        await db._execute(work, db._conn, *args)  # type: ignore[no-untyped-call]

    async def record_events(self, events: Sequence[Event]) -> None:
        await self.record(events=events)

    async def record_spec(self, published: PublishedSpec) -> None:
        await self.record(specs=(published,))

    async def record_key(self, key: ApiKey) -> None:
        await self.record(keys=(key,))

    async def record_memories(self, records: Sequence[MemoryRecord]) -> None:
        """Index `records` (a record already indexed is left as it is)."""
        await self._in_thread(_transaction, [(memories.INSERT, memories.record_rows(records))])

    async def forget_memories(self, tenant: str, ids: Sequence[str]) -> None:
        """Delete the tenant's records `ids`, leaving none of their words in the file."""
        rows = [(tenant, id_) for id_ in ids]
        await securely(self._db, self._statements, [(memories.DELETE, rows)])

    async def forget_scope(self, scope: MemoryScope) -> None:
        """Delete every record of `scope`, leaving none of their words in the file."""
        rows = [(scope.tenant, scope.kind, scope.owner)]
        await securely(self._db, self._statements, [(memories.DELETE_SCOPE, rows)])

    async def record_document(self, indexed: IndexedDocument) -> None:
        """Record a document, and (released) its passages in place of any it had."""
        await self._in_thread(_transaction, knowledge.recorded(indexed))

    async def forget_document(self, tenant: str, id_: str) -> None:
        """Delete the tenant's document `id_` and its passages, leaving none of their words
        in the file."""
        await securely(self._db, self._statements, knowledge.removed(tenant, id_))

    async def _statements(self, statements: Statements) -> None:
        await self._in_thread(_transaction, statements)

    async def unembedded(self, tenant: str, model: str, limit: int) -> list[Unembedded]:
        """The tenant's memory records and passages without a vector of `model`."""
        fetch = self._db.execute_fetchall
        mems = list(await fetch(vectors.UNEMBEDDED_MEMORIES, (tenant, model, limit)))
        left = max(limit - len(mems), 0)
        found = (
            list(await fetch(vectors.UNEMBEDDED_PASSAGES, (tenant, model, left))) if left else []
        )
        return vectors.unembedded(tenant, mems, found)

    async def record_vectors(self, model: str, filled: Sequence[tuple[Unembedded, bytes]]) -> None:
        """Keep each row's vector, if the row still holds the text it was made from."""
        await self._in_thread(_transaction, vectors.updates(model, filled))

    async def unembedded_tenants(self, model: str) -> list[str]:
        return [str(r[0]) for r in await self._db.execute_fetchall(vectors.TENANTS, (model, model))]

    # --- reads ------------------------------------------------------------------------

    async def search_memories(
        self, search: MemorySearch, query: QueryVector | None = None
    ) -> list[MemoryHit]:
        """The records that match `search`'s words within its scopes, most relevant first
        (with `query`'s vector, fused with the records nearest it, within them too)."""
        return await memories.search(self._db, search, query)

    async def memories(self, scope: MemoryScope, limit: int = 100) -> list[MemoryRecord]:
        """The scope's records, newest first."""
        return await memories.listed(self._db, scope, limit)

    async def search_documents(
        self, search: DocumentSearch, query: QueryVector | None = None
    ) -> list[PassageHit]:
        """The tenant's released passages that match `search`'s words, most relevant first
        (with `query`'s vector, fused with the passages nearest it, of them too)."""
        return await knowledge.search(self._db, search, query)

    async def documents(self, tenant: str, limit: int = 100) -> list[Document]:
        """The tenant's documents, drafts too, newest first."""
        return await knowledge.listed(self._db, tenant, limit)

    async def document(self, tenant: str, id_: str) -> Document | None:
        return await knowledge.one(self._db, tenant, id_)

    async def timeline(
        self, agent: str, after_seq: int = 0, limit: int = 100, *, max_bytes: int | None = None
    ) -> list[Event]:
        """`page`'s events."""
        return (await self.page(agent, after_seq, limit, max_bytes=max_bytes)).events

    async def page(
        self, agent: str, after_seq: int = 0, limit: int = 100, *, max_bytes: int | None = None
    ) -> Page:
        """The events after `after_seq`, up to the first one not written yet: a reader
        never skips an event that lands late (batches of different wakes can be written
        out of order, e.g. while the projector catches up after a restart). With
        `max_bytes`, the page ends before the event that would take its stored JSON past
        that many bytes (the first event is always given, whatever its size)."""
        cursor = await self._db.execute(
            "select seq, event from events where agent = ? and seq > ? order by seq limit ?",
            (agent, after_seq, limit),
        )
        rows = list(await cursor.fetchall())
        events: list[Event] = []
        size = 0
        for expected, (seq, raw) in enumerate(rows, start=after_seq + 1):
            size += len(raw)
            if seq != expected:
                return Page(events, full=False)
            if max_bytes is not None and size > max_bytes and events:
                return Page(events, full=True)
            events.append(msgspec.json.decode(raw, type=Event))
        return Page(events, full=len(rows) >= limit)

    async def recent(self, agent: str, max_bytes: int) -> list[Event]:
        """The newest events whose stored JSON fits in `max_bytes` (at least the newest
        one), in seq order, from the start of the oldest turn they reach whole: what a
        history shows of a long timeline without loading all of it."""
        rows: list[tuple[int, bytes]] = []
        size = 0
        sql = "select turn, event from events where agent = ? order by seq desc"
        async with self._db.execute(sql, (agent,)) as cursor:
            while batch := await cursor.fetchmany(64):
                for turn, raw in batch:
                    size += len(raw)
                    if size > max_bytes and rows:
                        return _from_turn(rows, turn)
                    rows.append((turn, raw))
        return _from_turn(rows, None)

    async def approval(self, agent: str, request_id: str) -> ApprovalRow | None:
        """What the timeline shows of one approval request: None when it was never asked."""
        rows = await self._db.execute_fetchall(
            "select type, turn, event from events where agent = ? and type in"
            " ('approval_requested', 'approval_answered', 'approval_abandoned',"
            " 'page_call_claimed')"
            " and json_extract(cast(event as text), '$.body.request_id') = ?",
            (agent, request_id),
        )
        types = {row[0]: row[1] for row in rows}
        if "approval_requested" not in types:
            return None
        turn = types["approval_requested"]
        ended = await self._one_or_none(
            "select 1 from events where agent = ? and turn = ? and type = 'turn_ended'",
            agent,
            turn,
        )
        return approval_row(rows, turn, ended is not None)

    async def open_page_calls(self, agent: str) -> dict[str, str]:
        """The calls that run in the page the agent's newest turn waits on, by request id,
        with the page that claimed each ('' for none yet)."""
        newest = await self._one_or_none("select max(turn) from events where agent = ?", agent)
        if newest is None or newest[0] is None:
            return {}
        rows = await self._db.execute_fetchall(
            "select type, event from events where agent = ? and turn = ? and type in"
            " ('approval_requested', 'approval_answered', 'approval_abandoned',"
            " 'page_call_claimed', 'turn_ended') order by seq",
            (agent, newest[0]),
        )
        return open_calls(rows)

    async def turn(self, agent: str, turn: int) -> list[Event]:
        """The events recorded in one turn, in seq order ([] for a turn never started)."""
        rows = await self._db.execute_fetchall(
            "select event from events where agent = ? and turn = ? order by seq", (agent, turn)
        )
        return [msgspec.json.decode(row[0], type=Event) for row in rows]

    async def message_story(self, agent: str, message_id: str) -> list[Event]:
        """Where one message stands, in seq order: the events that name it (its
        `message_queued`, its `turn_started` or its `message_rejected`) and, once its turn
        started, that turn's approvals, parking and end, and its newest event. Empty for a
        message the timeline does not show."""
        named = await self._db.execute_fetchall(
            "select seq, turn, type, event from events where agent = ?"
            " and type in ('message_queued', 'turn_started', 'message_rejected')"
            " and json_extract(cast(event as text), '$.body.message_id') = ? order by seq",
            (agent, message_id),
        )
        started = [row for row in named if row[2] == "turn_started"]
        rows: list[tuple[int, bytes]] = [(row[0], row[3]) for row in named]
        if started:
            turn = started[0][1]
            story = await self._db.execute_fetchall(
                "select seq, event from events where agent = ? and turn = ? and seq > ? and"
                " (type in ('approval_requested', 'approval_answered', 'approval_abandoned',"
                " 'turn_parked', 'turn_ended') or seq = (select max(seq) from events"
                " where agent = ? and seq > ? and turn = ?)) order by seq",
                (agent, turn, started[0][0], agent, started[0][0], turn),
            )
            rows += [(row[0], row[1]) for row in story]
        return [msgspec.json.decode(raw, type=Event) for _, raw in sorted(rows)]

    async def queued(self, agents: Sequence[str]) -> dict[str, int]:
        """How many messages each agent holds queued: messages with a `message_queued`
        among its newest `QUEUE_WINDOW` events that have not started a turn since, nor been
        refused (a full queue refuses one a running turn heard queued; agents with none are
        left out); a message queued twice (heard by a running turn, then
        held by a pause) counts once."""
        if not agents:
            return {}
        marks = ", ".join("?" * len(agents))
        rows = await self._db.execute_fetchall(
            "select q.agent, count(distinct coalesce(nullif(json_extract(cast(q.event as text),"  # noqa: S608 - placeholders
            " '$.body.message_id'), ''), q.seq)) from events q where q.type = 'message_queued'"
            f" and q.agent in ({marks}) and q.seq > (select max(seq) from events a"
            " where a.agent = q.agent) - ? and not exists (select 1 from events t"
            " where t.agent = q.agent and t.seq > q.seq"
            " and t.type in ('turn_started', 'message_rejected')"
            " and json_extract(cast(t.event as text), '$.body.message_id')"
            " = json_extract(cast(q.event as text), '$.body.message_id')) group by q.agent",
            (*agents, QUEUE_WINDOW),
        )
        return {str(agent): int(count) for agent, count in rows}

    async def agent(self, address: str) -> AgentRow | None:
        row = await self._one_or_none(f"select {_AGENT} from agents where address = ?", address)  # noqa: S608
        return AgentRow(*row) if row else None

    async def agents(
        self,
        tenant: str,
        *,
        kind: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 50,
    ) -> list[AgentRow]:
        cursor = await self._db.execute(
            f"select {_AGENT} from agents where tenant = ? and address > ?"  # noqa: S608
            " and (? is null or kind = ?) and (? is null or status = ?)"
            " order by address limit ?",
            (tenant, after, kind, kind, status, status, limit),
        )
        return [AgentRow(*row) for row in await cursor.fetchall()]

    async def specs(self, tenant: str, kind: str | None = None) -> list[PublishedSpec]:
        cursor = await self._db.execute(
            "select spec, published_at from specs where tenant = ? and (? is null or kind = ?)"
            " order by kind, version",
            (tenant, kind, kind),
        )
        return [
            PublishedSpec(tenant, msgspec.json.decode(spec, type=AgentSpec), _time(at))
            for spec, at in await cursor.fetchall()
        ]

    async def latest_spec(self, tenant: str, kind: str) -> AgentSpec | None:
        row = await self._one_or_none(
            "select spec from specs where tenant = ? and kind = ? order by version desc limit 1",
            tenant,
            kind,
        )
        return msgspec.json.decode(row[0], type=AgentSpec) if row else None

    async def agent_count(self, tenant: str) -> int:
        row = await self._one_or_none("select count(*) from agents where tenant = ?", tenant)
        return int(row[0]) if row else 0

    async def tokens_since(self, tenant: str, since: datetime) -> int:
        """Model tokens (prompt and completion) of `tenant`'s agents' rounds recorded at or
        after `since` (UTC)."""
        row = await self._one_or_none(
            "select coalesce(sum("
            "coalesce(json_extract(cast(event as text), '$.body.usage.prompt_tokens'), 0) +"
            " coalesce(json_extract(cast(event as text), '$.body.usage.completion_tokens'), 0)"
            "), 0) from events where type = 'model_message' and at >= ?"
            " and agent > ? and agent < ?",
            since.isoformat(),
            f"{tenant}.",
            f"{tenant}/",
        )
        return int(row[0]) if row else 0

    async def key_by_hash(self, hash_: str) -> ApiKey | None:
        row = await self._one_or_none(
            f"select {_KEY_COLUMNS} from keys where hash = ?",  # noqa: S608 - constant columns
            hash_,
        )
        return _key(tuple(row)) if row else None

    async def publishable_origins(self) -> frozenset[str]:
        """Every origin a publishable key that is not revoked lists, of any tenant: what a
        CORS preflight, which carries no key, is answered for."""
        cursor = await self._db.execute(
            "select distinct o.value from keys k, json_each(k.origins) o"
            " where k.scope = 'publishable' and k.revoked_at is null"
        )
        return frozenset(str(row[0]) for row in await cursor.fetchall())

    async def keys(self, tenant: str | None = None) -> list[ApiKey]:
        cursor = await self._db.execute(
            f"select {_KEY_COLUMNS} from keys"  # noqa: S608 - constant columns
            " where ? is null or tenant = ? order by created_at, id",
            (tenant, tenant),
        )
        return [_key(tuple(row)) for row in await cursor.fetchall()]

    async def tallies(self) -> tallies.Tallies:
        """What the metrics count over every tenant (`tallies.py`)."""
        return await tallies.tallies(self._db)

    async def wrote_artifact(self, agent: str, sha256: str) -> bool:
        """Whether the agent's timeline shows it wrote the artifact `sha256`."""
        return await tallies.wrote_artifact(self._db, agent, sha256)

    async def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows in a stable order: for comparing two projections."""
        tables = {}
        for table, order in (
            ("events", "agent, seq"),
            ("agents", "address"),
            ("specs", "tenant, kind, version"),
            ("keys", "id"),
        ):
            cursor = await self._db.execute(f"select * from {table} order by {order}")  # noqa: S608
            tables[table] = [tuple(row) for row in await cursor.fetchall()]
        return tables

    # --- erasure (the projector's writer only) ----------------------------------------

    async def erasable(self, prefix: str) -> Erasable:
        """What the projection holds of the agents `prefix` names (`erasure.erasable`)."""
        return await erasable(self._db, prefix)

    async def erase(self, prefix: str, *, tenant: str | None = None) -> None:
        """Delete the rows of the agents `prefix` names (`erasure.erase`)."""
        await erase(self._db, lambda statements: self._in_thread(_transaction, statements),
                    prefix, tenant)  # fmt: skip

    async def mark_archived(self, address: str, *, archived: bool) -> None:
        """Show the agent archived in the catalog, or (back in Restate) idle again: an
        archived agent had no turn in progress, and its next event decides anew."""
        if archived:
            statement = "update agents set status = 'archived' where address = ?"
        else:
            statement = (
                "update agents set status = 'idle' where address = ? and status = 'archived'"
            )
        await self._in_thread(_transaction, [(statement, [(address,)])])

    async def _one_or_none(self, sql: str, *args: object) -> tuple[Any, ...] | None:
        cursor = await self._db.execute(sql, args)
        row = await cursor.fetchone()
        return tuple(row) if row is not None else None


async def _migrate(db: aiosqlite.Connection) -> None:
    """Run the migrations the file has not had, each in a transaction that takes the write
    lock first and records its version before its script: a second writer opening the file
    at the same time waits for the lock, and a version the other recorded meanwhile fails
    its insert before the script runs, is rolled back, and is read again as done."""
    await db.execute("create table if not exists migrations (version integer primary key)")
    while (version := await _done(db) + 1) <= len(MIGRATIONS):
        record = f"insert into migrations values ({version})"  # noqa: S608 - an int
        try:
            await db.executescript(f"begin immediate; {record}; {MIGRATIONS[version - 1]}; commit;")
        except sqlite3.IntegrityError:
            await db.rollback()
            if await _done(db) < version:
                raise
        except BaseException:
            await db.rollback()
            raise


async def _write_ahead(db: aiosqlite.Connection) -> None:
    """Put the file in write-ahead mode (it stays so). The switch needs the file to itself,
    and SQLite answers a switch that finds another connection on it at once with "locked"
    rather than waiting, so it is tried again until the wait for migrations is spent."""
    deadline = asyncio.get_running_loop().time() + MIGRATION_WAIT_MS / 1000
    while True:
        try:
            await db.execute("pragma journal_mode=wal")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.02)


async def _done(db: aiosqlite.Connection) -> int:
    rows = list(await db.execute_fetchall("select coalesce(max(version), 0) from migrations"))
    return int(rows[0][0]) if rows else 0


def _transaction(
    db: sqlite3.Connection, statements: Sequence[tuple[str, Sequence[tuple[Any, ...]]]]
) -> None:
    try:
        for sql, rows in statements:
            db.executemany(sql, rows)
        db.commit()
    except BaseException:
        db.rollback()
        raise


def _event_rows(events: Sequence[Event]) -> list[tuple[Any, ...]]:
    encode, tags = _ENCODER.encode, BODY_TAGS
    return [
        (e.agent, e.seq, e.turn, tags[type(e.body)], e.at.isoformat(), encode(e)) for e in events
    ]


def _spec_rows(specs: Sequence[PublishedSpec]) -> list[tuple[Any, ...]]:
    return [
        (p.tenant, p.spec.kind, p.spec.version, msgspec.json.encode(p.spec),
         p.published_at.isoformat())
        for p in specs
    ]  # fmt: skip


def _key_rows(keys: Sequence[ApiKey]) -> list[tuple[Any, ...]]:
    return [
        (k.id, k.tenant, k.scope, k.hash, k.created_at.isoformat(),
         k.revoked_at.isoformat() if k.revoked_at else None, k.name,
         _ENCODER.encode(k.origins).decode(), _ENCODER.encode(k.kinds).decode())
        for k in keys
    ]  # fmt: skip


def approval_row(rows: Iterable[Sequence[Any]], turn: int, turn_ended: bool) -> ApprovalRow:
    """A request's story from its rows (type, turn, event JSON) and whether its turn
    ended: each store reads them in its own SQL."""
    rows = list(rows)
    types = {row[0] for row in rows}
    asked = next(row[2] for row in rows if row[0] == "approval_requested")
    body = msgspec.json.decode(asked, type=Event).body
    requested = body if isinstance(body, ApprovalRequested) else None
    questions = requested.questions if requested is not None else {}
    claims = [msgspec.json.decode(r[2], type=Event).body for r in rows]
    claimed = next((c.page for c in claims if isinstance(c, PageCallClaimed)), "")
    ended = turn_ended or "approval_abandoned" in types
    return ApprovalRow(turn, "approval_answered" in types, ended, questions, requested, claimed)


def open_calls(rows: Iterable[Sequence[Any]]) -> dict[str, str]:
    """The page calls still open in a turn's request rows (type, event JSON) in seq
    order, with the page that claimed each; none once the turn ended."""
    found: dict[str, str] = {}
    for kind, raw in rows:
        body = msgspec.json.decode(raw, type=Event).body
        if isinstance(body, ApprovalRequested) and body.page:
            found[body.request_id] = ""
        elif isinstance(body, PageCallClaimed) and body.request_id in found:
            found[body.request_id] = body.page
        elif kind == "turn_ended":
            return {}
        elif isinstance(body, ApprovalAnswered | ApprovalAbandoned):
            found.pop(body.request_id, None)
    return found


def _from_turn(newest_first: list[tuple[int, bytes]], cut: int | None) -> list[Event]:
    """The rows after the turn the byte bound cut into (it is shown whole or not at all),
    oldest first; the newest turn is kept even if it was cut."""
    rows = [(turn, raw) for turn, raw in newest_first if turn != cut] or newest_first
    return [msgspec.json.decode(raw, type=Event) for _, raw in reversed(rows)]


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _key(row: tuple[Any, ...]) -> ApiKey:
    id_, tenant, scope, hash_, created, revoked, name, origins, kinds = row
    revoked_at = _time(revoked) if revoked else None
    return ApiKey(
        id_, tenant, scope, hash_, _time(created), revoked_at, name=name,
        origins=_strings(origins), kinds=_strings(kinds),
    )  # fmt: skip


def _strings(text: str) -> tuple[str, ...]:
    return msgspec.json.decode(text, type=tuple[str, ...])
