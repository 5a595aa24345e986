"""The PostgreSQL store's reads of timelines: the same answers as SQLite's (`store.py`),
each query its counterpart with PostgreSQL's JSON operators (`->`, `->>`) in place of
`json_extract`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec
from psycopg import AsyncConnection

from schemas.events import (
    Event,
)
from services.projection.store import (
    QUEUE_WINDOW,
    ApprovalRow,
    Page,
    _from_turn,
    approval_row,
    open_calls,
)
from services.projection.tallies import Tallies

_APPROVALS = (
    "('approval_requested', 'approval_answered', 'approval_abandoned', 'page_call_claimed')"
)


class TimelineReads:
    """Reads of the `events` table; `PostgresStore` is the rest."""

    def __init__(self, db: AsyncConnection[tuple[Any, ...]]) -> None:
        self._db = db

    async def timeline(
        self, agent: str, after_seq: int = 0, limit: int = 100, *, max_bytes: int | None = None
    ) -> list[Event]:
        """`page`'s events."""
        return (await self.page(agent, after_seq, limit, max_bytes=max_bytes)).events

    async def page(
        self, agent: str, after_seq: int = 0, limit: int = 100, *, max_bytes: int | None = None
    ) -> Page:
        """As SQLite's `page`: up to the first event not written yet, and `max_bytes` of
        the events' JSON (the first event always)."""
        rows = await self._all(
            "select seq, event::text, octet_length(event::text) from events"
            " where agent = %s and seq > %s order by seq limit %s",
            agent, after_seq, limit,
        )  # fmt: skip
        events: list[Event] = []
        size = 0
        for expected, (seq, raw, length) in enumerate(rows, start=after_seq + 1):
            size += length
            if seq != expected:
                return Page(events, full=False)
            if max_bytes is not None and size > max_bytes and events:
                return Page(events, full=True)
            events.append(msgspec.json.decode(raw, type=Event))
        return Page(events, full=len(rows) >= limit)

    async def recent(self, agent: str, max_bytes: int) -> list[Event]:
        """As SQLite's `recent`: the newest whole turns that fit in `max_bytes`."""
        rows: list[tuple[int, str]] = []
        size = 0
        statement = (
            "select turn, event::text, octet_length(event::text) from events"
            " where agent = %s order by seq desc"
        )
        async with self._db.transaction(), self._db.cursor(name="recent") as cursor:
            await cursor.execute(statement, (agent,))
            while batch := await cursor.fetchmany(64):
                for turn, raw, length in batch:
                    size += length
                    if size > max_bytes and rows:
                        return _from_turn(rows, turn)  # type: ignore[arg-type] # str decodes
                    rows.append((turn, raw))
        return _from_turn(rows, None)  # type: ignore[arg-type] # str decodes as bytes do

    async def approval(self, agent: str, request_id: str) -> ApprovalRow | None:
        """What the timeline shows of one approval request: None when it was never asked."""
        rows = await self._all(
            "select type, turn, event::text from events where agent = %s"  # noqa: S608 - placeholders
            f" and type in {_APPROVALS} and event->'body'->>'request_id' = %s",
            agent,
            request_id,
        )
        types = {row[0]: row[1] for row in rows}
        if "approval_requested" not in types:
            return None
        turn = types["approval_requested"]
        ended = await self._one_or_none(
            "select 1 from events where agent = %s and turn = %s and type = 'turn_ended'",
            agent,
            turn,
        )
        return approval_row(rows, turn, ended is not None)

    async def open_page_calls(self, agent: str) -> dict[str, str]:
        """As SQLite's `open_page_calls`."""
        newest = await self._one_or_none("select max(turn) from events where agent = %s", agent)
        if newest is None or newest[0] is None:
            return {}
        rows = await self._all(
            "select type, event::text from events where agent = %s and turn = %s and type in"
            " ('approval_requested', 'approval_answered', 'approval_abandoned',"
            " 'page_call_claimed', 'turn_ended') order by seq",
            agent,
            newest[0],
        )
        return open_calls(rows)

    async def turn(self, agent: str, turn: int) -> list[Event]:
        """The events recorded in one turn, in seq order ([] for a turn never started)."""
        rows = await self._all(
            "select event::text from events where agent = %s and turn = %s order by seq",
            agent,
            turn,
        )
        return [msgspec.json.decode(row[0], type=Event) for row in rows]

    async def message_story(self, agent: str, message_id: str) -> list[Event]:
        """As SQLite's `message_story`."""
        named = await self._all(
            "select seq, turn, type, event::text from events where agent = %s"
            " and type in ('message_queued', 'turn_started', 'message_rejected')"
            " and event->'body'->>'message_id' = %s order by seq",
            agent,
            message_id,
        )
        started = [row for row in named if row[2] == "turn_started"]
        rows: list[tuple[int, str]] = [(row[0], row[3]) for row in named]
        if started:
            seq, turn = started[0][0], started[0][1]
            rows += await self._all(
                "select seq, event::text from events where agent = %s and turn = %s"
                " and seq > %s and (type in ('approval_requested', 'approval_answered',"
                " 'approval_abandoned', 'turn_parked', 'turn_ended') or seq = (select max(seq)"
                " from events where agent = %s and seq > %s and turn = %s)) order by seq",
                agent, turn, seq, agent, seq, turn,
            )  # fmt: skip
        return [msgspec.json.decode(raw, type=Event) for _, raw in sorted(rows)]

    async def queued(self, agents: Sequence[str]) -> dict[str, int]:
        """As SQLite's `queued`: messages queued among each agent's newest `QUEUE_WINDOW`
        events that have not started a turn since, nor been refused."""
        if not agents:
            return {}
        rows = await self._all(
            "select q.agent, count(distinct (nullif(q.event->'body'->>'message_id', ''),"
            " case when nullif(q.event->'body'->>'message_id', '') is null then q.seq end))"
            " from events q where q.type = 'message_queued' and q.agent = any(%s)"
            " and q.seq > (select max(seq) from events a where a.agent = q.agent) - %s"
            " and not exists (select 1 from events t where t.agent = q.agent"
            " and t.seq > q.seq and t.type in ('turn_started', 'message_rejected')"
            " and t.event->'body'->>'message_id' = q.event->'body'->>'message_id')"
            " group by q.agent",
            list(agents),
            QUEUE_WINDOW,
        )
        return {str(agent): int(count) for agent, count in rows}

    async def tokens_since(self, tenant: str, since: datetime) -> int:
        """Model tokens (prompt and completion) of `tenant`'s agents' rounds recorded at or
        after `since` (UTC)."""
        row = await self._one_or_none(
            "select coalesce(sum("
            "coalesce((event->'body'->'usage'->>'prompt_tokens')::bigint, 0) +"
            " coalesce((event->'body'->'usage'->>'completion_tokens')::bigint, 0)"
            "), 0) from events where type = 'model_message' and at >= %s"
            " and agent > %s and agent < %s",
            since.isoformat(),
            f"{tenant}.",
            f"{tenant}/",
        )
        return int(row[0]) if row else 0

    async def tallies(self) -> Tallies:
        """What the metrics count over every tenant (`tallies.py`'s queries)."""
        rounds = await self._one_or_none(
            "select count(*),"
            " coalesce(sum((event->'body'->'usage'->>'prompt_tokens')::bigint), 0),"
            " coalesce(sum((event->'body'->'usage'->>'completion_tokens')::bigint), 0),"
            " coalesce(sum((event->'body'->'usage'->>'cached_tokens')::bigint), 0)"
            " from events where type = 'model_message'"
        )
        errors = await self._one_or_none(
            "select count(*) from events where type = 'tool_finished'"
            " and event->'body'->>'status' = 'error'"
        )
        assert rounds is not None
        assert errors is not None
        return Tallies(
            await self._all(
                "select event->'body'->>'outcome', count(*) from events"
                " where type = 'turn_ended' group by 1"
            ),
            (int(rounds[0]), int(rounds[1]), int(rounds[2]), int(rounds[3])),
            int(errors[0]),
            await self._all("select status, count(*) from agents group by status"),
            await self._all(
                "select event->'body'->>'model', count(*),"
                " coalesce(sum((event->'body'->'usage'->>'prompt_tokens')::bigint), 0),"
                " coalesce(sum((event->'body'->'usage'->>'cached_tokens')::bigint), 0),"
                " coalesce(sum((event->'body'->'timing'->>'queue_seconds')::float8), 0),"
                " coalesce(sum((event->'body'->'timing'->>'first_token_seconds')::float8), 0),"
                " coalesce(avg((event->'body'->'timing'->>'tokens_per_second')::float8), 0)"
                " from events where type = 'model_message' group by 1 order by 1"
            ),
            await self._all(
                "select event->'body'->>'model', count(*) from events"
                " where type = 'model_fallback' group by 1 order by 1"
            ),
        )

    async def wrote_artifact(self, agent: str, sha256: str) -> bool:
        """Whether the agent's timeline shows it wrote the artifact `sha256`."""
        row = await self._one_or_none(
            "select 1 from events where agent = %s and type = 'artifact_written'"
            " and event->'body'->>'sha256' = %s limit 1",
            agent,
            sha256,
        )
        return row is not None

    async def _all(self, statement: str, *args: object) -> list[tuple[Any, ...]]:
        cursor = await self._db.execute(statement, args)
        return await cursor.fetchall()

    async def _one_or_none(self, statement: str, *args: object) -> tuple[Any, ...] | None:
        cursor = await self._db.execute(statement, args)
        return await cursor.fetchone()
