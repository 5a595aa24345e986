"""The projection store on PostgreSQL: the read side several machines share.

The same tables, upserts and reads as the SQLite store (`store.py`), so duplicated and
reordered input leaves the same rows; each `record` is one transaction. A commit that
holds events also tells whoever listens on `CHANNEL` which agents' timelines grew
(`NOTIFY`, delivered when the transaction commits, never before, and never for one rolled
back).

Erasure deletes the rows and vacuums the tables they were in, so neither the table nor
its indexes keep them as dead rows. Unlike SQLite's `secure_delete`, PostgreSQL does not
overwrite freed space at once, and its write-ahead log keeps the text until it is
recycled: an installation that must prove erasure on disk sets its WAL retention to match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, LiteralString

import msgspec
from psycopg import AsyncConnection, sql

from schemas.events import BODY_TAGS, Event
from schemas.knowledge import Document, DocumentSearch, IndexedDocument, PassageHit
from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, PublishedSpec
from services.projection import postgres_search as indexes
from services.projection import vectors
from services.projection.catalog import Decided, catalog_rows
from services.projection.embeddings import QueryVector
from services.projection.erasure import Erasable
from services.projection.postgres_erasure import erasable, erase
from services.projection.postgres_migrations import MIGRATIONS
from services.projection.postgres_timeline import TimelineReads
from services.projection.store import AgentRow, _key, _key_rows, _spec_rows
from services.projection.stores import CHANNEL
from services.projection.vectors import Unembedded

MIGRATION_LOCK = 0x7EA5_9111
"""The advisory lock writers take while migrating, so two starting at once take turns."""
_AGENT = "address, tenant, kind, spec_version, status, turn, last_seq, last_outcome, last_activity"
_UPSERT_AGENT = """
insert into agents (address, tenant, kind, spec_version, started_seq, status, status_seq,
    last_outcome, ended_seq, turn, last_seq, last_activity)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
on conflict (address) do update set
    kind = case when excluded.started_seq > agents.started_seq
        then excluded.kind else agents.kind end,
    spec_version = case when excluded.started_seq > agents.started_seq
        then excluded.spec_version else agents.spec_version end,
    started_seq = greatest(agents.started_seq, excluded.started_seq),
    status = case when excluded.status_seq > agents.status_seq
        then excluded.status else agents.status end,
    status_seq = greatest(agents.status_seq, excluded.status_seq),
    last_outcome = case when excluded.ended_seq > agents.ended_seq
        then excluded.last_outcome else agents.last_outcome end,
    ended_seq = greatest(agents.ended_seq, excluded.ended_seq),
    turn = greatest(agents.turn, excluded.turn),
    last_seq = greatest(agents.last_seq, excluded.last_seq),
    last_activity = greatest(agents.last_activity, excluded.last_activity)
"""
"""The catalog's merge, as SQLite's (`store._UPSERT_AGENT`)."""
_INSERT_EVENTS = (
    "insert into events (agent, seq, turn, type, at, event) values (%s, %s, %s, %s, %s, %s)"
    " on conflict (agent, seq) do nothing"
)
_INSERT_SPECS = (
    "insert into specs (tenant, kind, version, spec, published_at) values (%s, %s, %s, %s, %s)"
    " on conflict do nothing"
)
_KEY_COLUMNS = "id, tenant, scope, hash, created_at, revoked_at, name, origins, kinds"
_UPSERT_KEYS = (
    f"insert into keys ({_KEY_COLUMNS}) values (%s, %s, %s, %s, %s, %s, %s, %s, %s)"  # noqa: S608 - placeholders
    " on conflict (id) do update set revoked_at = coalesce(keys.revoked_at, excluded.revoked_at)"
)
_NOTIFY = "select pg_notify(%s, %s)"
_ENCODER = msgspec.json.Encoder()
Statements = list[tuple[LiteralString, Sequence[tuple[Any, ...]]]]


class PostgresStore(TimelineReads):
    def __init__(self, db: AsyncConnection[tuple[Any, ...]], url: str) -> None:
        super().__init__(db)
        self.url = url

    @classmethod
    async def open(cls, url: str, *, readonly: bool = False) -> PostgresStore:
        """Connect to `url` (a libpq URL or connection string); a writer migrates the
        schema first, a reader only reads."""
        db = await AsyncConnection.connect(url, autocommit=True)
        if readonly:
            await db.execute("set default_transaction_read_only = on")
        else:
            await _migrate(db)
        return cls(db, url)

    @property
    def broken(self) -> bool:
        """Whether the connection is lost (the server restarted, say): open the store again."""
        return self._db.broken or self._db.closed

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> PostgresStore:
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
        """Everything given, in one transaction: all of it is recorded, or none; and the
        agents whose events it holds notified at its commit."""
        statements: Statements = []
        if events:
            statements.append((_INSERT_EVENTS, _event_rows(events)))
            statements.append((_UPSERT_AGENT, catalog_rows(events, statuses)))
        if specs:
            statements.append((_INSERT_SPECS, _spec_rows(specs)))
        if keys:
            statements.append((_UPSERT_KEYS, _key_rows(keys)))
        if events:
            statements.append((_NOTIFY, _notices(events)))
        await self._transaction(statements)

    async def record_events(self, events: Sequence[Event]) -> None:
        await self.record(events=events)

    async def record_spec(self, published: PublishedSpec) -> None:
        await self.record(specs=(published,))

    async def record_key(self, key: ApiKey) -> None:
        await self.record(keys=(key,))

    async def record_memories(self, records: Sequence[MemoryRecord]) -> None:
        """Index `records` (a record already indexed is left as it is)."""
        await self._transaction([(indexes.INSERT_MEMORY, indexes.memory_rows(records))])

    async def forget_memories(self, tenant: str, ids: Sequence[str]) -> None:
        rows = [(tenant, id_) for id_ in ids]
        await self._securely([(indexes.DELETE_MEMORY, rows)], ("memories",))

    async def forget_scope(self, scope: MemoryScope) -> None:
        rows = [(scope.tenant, scope.kind, scope.owner)]
        await self._securely([(indexes.DELETE_SCOPE, rows)], ("memories",))

    async def record_document(self, indexed: IndexedDocument) -> None:
        """Record a document, and (released) its passages in place of any it had."""
        await self._transaction(indexes.recorded(indexed))

    async def forget_document(self, tenant: str, id_: str) -> None:
        await self._securely(indexes.removed(tenant, id_), ("passages", "documents"))

    async def unembedded(self, tenant: str, model: str, limit: int) -> list[Unembedded]:
        """As SQLite's `unembedded`."""
        mems = await self._all(_pg(vectors.UNEMBEDDED_MEMORIES), tenant, model, limit)
        left = max(limit - len(mems), 0)
        passages = _pg(vectors.UNEMBEDDED_PASSAGES)
        found = await self._all(passages, tenant, model, left) if left else []
        return vectors.unembedded(tenant, mems, found)

    async def record_vectors(self, model: str, filled: Sequence[tuple[Unembedded, bytes]]) -> None:
        """As SQLite's `record_vectors`."""
        await self._transaction([(_pg(q), rows) for q, rows in vectors.updates(model, filled)])

    async def unembedded_tenants(self, model: str) -> list[str]:
        return [str(r[0]) for r in await self._all(_pg(vectors.TENANTS), model, model)]

    async def erase(self, prefix: str, *, tenant: str | None = None) -> None:
        """Delete the rows of the agents `prefix` names (`postgres_erasure.erase`)."""
        touched = await erase(self._transaction, prefix, tenant)
        await self._vacuum(touched)

    async def mark_archived(self, address: str, *, archived: bool) -> None:
        """As SQLite's `mark_archived`."""
        if archived:
            statement: LiteralString = "update agents set status = 'archived' where address = %s"
        else:
            statement = (
                "update agents set status = 'idle' where address = %s and status = 'archived'"
            )
        await self._transaction([(statement, [(address,)])])

    async def clear(self) -> None:
        """Delete every row, in one transaction (a rebuild starts from empty tables)."""
        await self._db.execute(
            "truncate events, agents, specs, keys, memories, passages, documents"
        )

    async def _transaction(self, statements: Statements) -> None:
        if not statements:
            return
        async with self._db.transaction(), self._db.cursor() as cursor:
            for statement, rows in statements:
                if rows:
                    await cursor.executemany(statement, rows)

    async def _securely(self, statements: Statements, tables: Sequence[str]) -> None:
        await self._transaction(statements)
        await self._vacuum(tables)

    async def _vacuum(self, tables: Sequence[str]) -> None:
        """Remove the deleted rows from the tables and their indexes (outside any
        transaction, as `vacuum` must be)."""
        for table in dict.fromkeys(tables):
            await self._db.execute(sql.SQL("vacuum {}").format(sql.Identifier(table)))

    # --- reads ------------------------------------------------------------------------

    async def search_memories(
        self, search: MemorySearch, query: QueryVector | None = None
    ) -> list[MemoryHit]:
        """The records that match `search`'s words within its scopes, most relevant first
        (with `query`'s vector, fused with the records nearest it, within them too)."""
        return await indexes.memories(self._db, search, query)

    async def memories(self, scope: MemoryScope, limit: int = 100) -> list[MemoryRecord]:
        """The scope's records, newest first."""
        return await indexes.listed_memories(self._db, scope, limit)

    async def search_documents(
        self, search: DocumentSearch, query: QueryVector | None = None
    ) -> list[PassageHit]:
        return await indexes.passages(self._db, search, query)

    async def documents(self, tenant: str, limit: int = 100) -> list[Document]:
        return await indexes.listed_documents(self._db, tenant, limit)

    async def document(self, tenant: str, id_: str) -> Document | None:
        return await indexes.one_document(self._db, tenant, id_)

    async def agent(self, address: str) -> AgentRow | None:
        row = await self._one_or_none(f"select {_AGENT} from agents where address = %s", address)  # noqa: S608 - placeholders
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
        rows = await self._all(
            f"select {_AGENT} from agents where tenant = %s and address > %s"  # noqa: S608 - placeholders
            " and (%s::text is null or kind = %s) and (%s::text is null or status = %s)"
            " order by address limit %s",
            tenant, after, kind, kind, status, status, limit,
        )  # fmt: skip
        return [AgentRow(*row) for row in rows]

    async def specs(self, tenant: str, kind: str | None = None) -> list[PublishedSpec]:
        rows = await self._all(
            "select spec, published_at from specs where tenant = %s"
            " and (%s::text is null or kind = %s) order by kind, version",
            tenant, kind, kind,
        )  # fmt: skip
        return [
            PublishedSpec(tenant, msgspec.json.decode(spec, type=AgentSpec),
                          datetime.fromisoformat(at))
            for spec, at in rows
        ]  # fmt: skip

    async def latest_spec(self, tenant: str, kind: str) -> AgentSpec | None:
        row = await self._one_or_none(
            "select spec from specs where tenant = %s and kind = %s order by version desc limit 1",
            tenant,
            kind,
        )
        return msgspec.json.decode(row[0], type=AgentSpec) if row else None

    async def agent_count(self, tenant: str) -> int:
        row = await self._one_or_none("select count(*) from agents where tenant = %s", tenant)
        return int(row[0]) if row else 0

    async def key_by_hash(self, hash_: str) -> ApiKey | None:
        row = await self._one_or_none(f"select {_KEY_COLUMNS} from keys where hash = %s", hash_)  # noqa: S608 - placeholders
        return _key(row) if row else None

    async def publishable_origins(self) -> frozenset[str]:
        """Every origin a publishable key that is not revoked lists, of any tenant."""
        rows = await self._all(
            "select distinct o from keys k, json_array_elements_text(k.origins::json) o"
            " where k.scope = 'publishable' and k.revoked_at is null"
        )
        return frozenset(str(row[0]) for row in rows)

    async def keys(self, tenant: str | None = None) -> list[ApiKey]:
        rows = await self._all(
            f"select {_KEY_COLUMNS} from keys where %s::text is null or tenant = %s"  # noqa: S608 - placeholders
            " order by created_at, id",
            tenant,
            tenant,
        )
        return [_key(row) for row in rows]

    async def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows in a stable order, with SQLite's columns and types (an event
        as its bytes): for comparing two projections, of either store."""
        queries: dict[str, LiteralString] = {
            "events": "select agent, seq, turn, type, at, convert_to(event::text, 'UTF8')"
            " from events order by agent, seq",
            "agents": "select address, tenant, kind, spec_version, status, turn, last_seq,"
            " last_outcome, last_activity, status_seq, started_seq, ended_seq"
            " from agents order by address",
            "specs": "select tenant, kind, version, spec, published_at from specs"
            " order by tenant, kind, version",
            "keys": f"select {_KEY_COLUMNS} from keys order by id",  # noqa: S608 - placeholders
        }
        return {table: await self._all(query) for table, query in queries.items()}

    async def erasable(self, prefix: str) -> Erasable:
        """What the projection holds of the agents `prefix` names (`erasure.erasable`)."""
        return await erasable(self._db, prefix)


async def _migrate(db: AsyncConnection[tuple[Any, ...]]) -> None:
    async with db.transaction():
        await db.execute("select pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await db.execute("create table if not exists migrations (version integer primary key)")
        cursor = await db.execute("select coalesce(max(version), 0) from migrations")
        row = await cursor.fetchone()
        done = int(row[0]) if row else 0
        for version, script in enumerate(MIGRATIONS[done:], start=done + 1):
            await db.execute(script)
            await db.execute("insert into migrations values (%s)", (version,))


def _event_rows(events: Sequence[Event]) -> list[tuple[Any, ...]]:
    encode, tags = _ENCODER.encode, BODY_TAGS
    return [
        (e.agent, e.seq, e.turn, tags[type(e.body)], e.at.isoformat(), encode(e).decode())
        for e in events
    ]


def _notices(events: Sequence[Event]) -> list[tuple[str, str]]:
    newest: dict[str, int] = {}
    for event in events:
        newest[event.agent] = max(event.seq, newest.get(event.agent, 0))
    return [(CHANNEL, f"{agent} {seq}") for agent, seq in sorted(newest.items())]


def _pg(statement: str) -> LiteralString:
    """One of `vectors`' statements with PostgreSQL's placeholders (it holds no other `?`)."""
    return statement.replace("?", "%s")
