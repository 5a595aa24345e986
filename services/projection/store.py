"""The projection store: SQLite in WAL mode, written by one connection.

Every write is an upsert keyed by what it records, so duplicated and reordered input
leaves the same tables: the catalog row of an agent is recomputed from its events, never
incremented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import msgspec

from schemas.address import parse_address
from schemas.catalog import ApiKey, PublishedSpec
from schemas.events import Event, TurnEnded, TurnStarted
from schemas.spec import AgentSpec
from services.projection.migrations import MIGRATIONS

STATUS_BY_EVENT = {
    "turn_started": "running",
    "model_message": "running",
    "tool_called": "running",
    "tool_finished": "running",
    "child_spawned": "running",
    "waiting": "waiting",
    "approval_requested": "waiting",
    "turn_parked": "parked",
    "approval_answered": "running",
    "approval_abandoned": "running",
    "turn_ended": "idle",
}
"""Which events decide an agent's status; the newest of them wins."""


_DUMPS = {
    "events": "select * from events order by agent, seq",
    "agents": "select * from agents order by address",
    "specs": "select * from specs order by tenant, kind, version",
    "keys": "select * from keys order by id",
}


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
class ApprovalRow:
    turn: int
    answered: bool
    turn_ended: bool


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
            await db.execute("pragma journal_mode=wal")
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

    async def record_events(self, events: Sequence[Event]) -> None:
        rows = [
            (e.agent, e.seq, e.turn, _tag(e), e.at.isoformat(), msgspec.json.encode(e))
            for e in events
        ]
        await self._db.executemany(
            "insert into events (agent, seq, turn, type, at, event) values (?, ?, ?, ?, ?, ?)"
            " on conflict (agent, seq) do nothing",
            rows,
        )
        for agent in sorted({e.agent for e in events}):
            await self._refresh_agent(agent)
        await self._db.commit()

    async def _refresh_agent(self, agent: str) -> None:
        last_seq, last_at, turn = await self._one(
            "select max(seq), max(at), max(turn) from events where agent = ?", agent
        )
        status = await self._last_of(agent, tuple(STATUS_BY_EVENT))
        started = await self._last_of(agent, ("turn_started",))
        ended = await self._last_of(agent, ("turn_ended",))
        kind, version = ("", 0)
        if started is not None and isinstance(started.body, TurnStarted):
            kind, version = started.body.spec_kind, started.body.spec_version
        outcome = ended.body.outcome if ended and isinstance(ended.body, TurnEnded) else None
        state = STATUS_BY_EVENT[_tag(status)] if status else "idle"
        tenant = parse_address(agent).tenant
        row = (agent, tenant, kind, version, state, turn, last_seq, outcome, last_at)
        await self._db.execute(
            "insert or replace into agents (address, tenant, kind, spec_version, status, turn,"
            " last_seq, last_outcome, last_activity) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )

    async def _last_of(self, agent: str, types: tuple[str, ...]) -> Event | None:
        marks = ", ".join("?" * len(types))
        row = await self._one_or_none(
            f"select event from events where agent = ? and type in ({marks})"  # noqa: S608
            " order by seq desc limit 1",
            agent,
            *types,
        )
        return msgspec.json.decode(row[0], type=Event) if row else None

    async def record_spec(self, published: PublishedSpec) -> None:
        spec = published.spec
        await self._db.execute(
            "insert into specs (tenant, kind, version, spec, published_at) values (?, ?, ?, ?, ?)"
            " on conflict do nothing",
            (
                published.tenant,
                spec.kind,
                spec.version,
                msgspec.json.encode(spec),
                published.published_at.isoformat(),
            ),
        )
        await self._db.commit()

    async def record_key(self, key: ApiKey) -> None:
        revoked = key.revoked_at.isoformat() if key.revoked_at else None
        await self._db.execute(
            "insert into keys (id, tenant, scope, hash, created_at, revoked_at)"
            " values (?, ?, ?, ?, ?, ?) on conflict (id) do update set"
            " revoked_at = coalesce(keys.revoked_at, excluded.revoked_at)",
            (key.id, key.tenant, key.scope, key.hash, key.created_at.isoformat(), revoked),
        )
        await self._db.commit()

    # --- reads ------------------------------------------------------------------------

    async def timeline(self, agent: str, after_seq: int = 0, limit: int = 100) -> list[Event]:
        """The events after `after_seq`, up to the first one not written yet: a reader
        never skips an event that lands late (batches of different wakes can be written
        out of order, e.g. while the projector catches up after a restart)."""
        cursor = await self._db.execute(
            "select seq, event from events where agent = ? and seq > ? order by seq limit ?",
            (agent, after_seq, limit),
        )
        events = []
        for expected, (seq, raw) in enumerate(await cursor.fetchall(), start=after_seq + 1):
            if seq != expected:
                break
            events.append(msgspec.json.decode(raw, type=Event))
        return events

    async def approval(self, agent: str, request_id: str) -> ApprovalRow | None:
        """What the timeline shows of one approval request: None when it was never asked."""
        rows = await self._db.execute_fetchall(
            "select type, turn from events where agent = ? and type in"
            " ('approval_requested', 'approval_answered', 'approval_abandoned')"
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
        answered = "approval_answered" in types
        return ApprovalRow(turn, answered, ended is not None or "approval_abandoned" in types)

    async def agent(self, address: str) -> AgentRow | None:
        row = await self._one_or_none("select * from agents where address = ?", address)
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
            "select * from agents where tenant = ? and address > ?"
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

    async def key_by_hash(self, hash_: str) -> ApiKey | None:
        row = await self._one_or_none(
            "select id, tenant, scope, hash, created_at, revoked_at from keys where hash = ?",
            hash_,
        )
        return _key(tuple(row)) if row else None

    async def keys(self, tenant: str | None = None) -> list[ApiKey]:
        cursor = await self._db.execute(
            "select id, tenant, scope, hash, created_at, revoked_at from keys"
            " where ? is null or tenant = ? order by created_at, id",
            (tenant, tenant),
        )
        return [_key(tuple(row)) for row in await cursor.fetchall()]

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

    async def _one(self, sql: str, *args: object) -> tuple[Any, ...]:
        row = await self._one_or_none(sql, *args)
        assert row is not None
        return row

    async def _one_or_none(self, sql: str, *args: object) -> tuple[Any, ...] | None:
        cursor = await self._db.execute(sql, args)
        row = await cursor.fetchone()
        return tuple(row) if row is not None else None


async def _migrate(db: aiosqlite.Connection) -> None:
    await db.execute("create table if not exists migrations (version integer primary key)")
    cursor = await db.execute("select coalesce(max(version), 0) from migrations")
    row = await cursor.fetchone()
    done = int(row[0]) if row else 0
    for version, script in enumerate(MIGRATIONS[done:], start=done + 1):
        record = f"insert into migrations values ({version})"  # noqa: S608 - an int
        await db.executescript(f"begin; {script}; {record}; commit;")


def _tag(event: Event) -> str:
    return str(event.body.__struct_config__.tag)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _key(row: tuple[Any, ...]) -> ApiKey:
    id_, tenant, scope, hash_, created, revoked = row
    return ApiKey(id_, tenant, scope, hash_, _time(created), _time(revoked) if revoked else None)
