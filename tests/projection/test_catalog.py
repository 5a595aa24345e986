"""The incremental catalog: merged batch by batch, it equals a recompute from every event."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import (
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRequested,
    ChildReported,
    ChildSpawned,
    Event,
    EventBody,
    MessageQueued,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnParked,
    TurnStarted,
    Waiting,
)
from services.projection.catalog import Decided, catalog_rows
from services.projection.migrations import MIGRATIONS
from services.projection.store import ProjectionStore

T0 = datetime(2026, 11, 30, tzinfo=UTC)
BODIES: list[EventBody] = [
    TurnStarted("go", "helper", 1),
    TurnStarted("go", "coder", 4),
    MessageQueued("later"),
    ModelMessage("script", "hm"),
    ToolCalled("c", "calculator", {}),
    ToolFinished("c", "calculator", "ok", "2"),
    ChildSpawned("c", "acme.a.t1r1c0", "helper"),
    ChildReported("c", "acme.a.t1r1c0", "succeeded", "done"),
    Waiting(("x",)),
    ApprovalRequested("r", "c", "ledger"),
    ApprovalAnswered("r", True),
    ApprovalAbandoned("r"),
    TurnParked("r"),
    TurnEnded("succeeded", "ok"),
    TurnEnded("failed", reason="It broke."),
    TurnEnded("stopped"),
]
AGENTS = ["acme.a", "acme.b", "other.c"]
CATALOG = "address, tenant, kind, spec_version, status, turn, last_seq, last_outcome, last_activity"

# The catalog as it was computed before it was incremental: four queries per agent over
# every event it has. The reference the merged rows must equal.
RECOMPUTE = """
select a.agent, substr(a.agent, 1, instr(a.agent, '.') - 1),
    coalesce(json_extract(cast(s.event as text), '$.body.spec_kind'), ''),
    coalesce(json_extract(cast(s.event as text), '$.body.spec_version'), 0),
    case when st.type is null then 'idle'
        when st.type in ('waiting', 'approval_requested') then 'waiting'
        when st.type = 'turn_parked' then 'parked' when st.type = 'turn_ended' then 'idle'
        else 'running' end,
    a.turn, a.last_seq, json_extract(cast(e.event as text), '$.body.outcome'), a.last_at
from (select agent, max(seq) last_seq, max(at) last_at, max(turn) turn
      from events group by agent) a
left join events s on s.agent = a.agent and s.seq = (select max(seq) from events
    where agent = a.agent and type = 'turn_started')
left join events e on e.agent = a.agent and e.seq = (select max(seq) from events
    where agent = a.agent and type = 'turn_ended')
left join events st on st.agent = a.agent and st.seq = (select max(seq) from events
    where agent = a.agent and type in ('turn_started', 'model_message', 'tool_called',
    'tool_finished', 'child_spawned', 'waiting', 'approval_requested', 'turn_parked',
    'approval_answered', 'approval_abandoned', 'turn_ended'))
order by a.agent
"""


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    """Every agent's timeline: seq 1..n, turns that never go back, times in any order."""
    events = []
    for agent in draw(st.lists(st.sampled_from(AGENTS), min_size=1, max_size=3, unique=True)):
        bodies = draw(st.lists(st.sampled_from(BODIES), min_size=1, max_size=12))
        turn = 1
        for seq, body in enumerate(bodies, start=1):
            turn += draw(st.integers(0, 1))
            at = T0 + timedelta(seconds=draw(st.integers(0, 40)))
            events.append(Event(agent, seq, turn, 1, at, body))
    return events


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[Event], list[list[Event]]]:
    """A history, and the batches it arrives in: shuffled, some events more than once."""
    events = draw(histories())
    again = draw(st.lists(st.sampled_from(events), max_size=len(events)))
    arriving = draw(st.permutations(events + again))
    cuts = sorted(draw(st.sets(st.integers(1, len(arriving)), max_size=6)))
    bounds = [0, *cuts, len(arriving)]
    return events, [arriving[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def project(batches: list[list[Event]]) -> dict[str, list[tuple[Any, ...]]]:
    async def run() -> dict[str, list[tuple[Any, ...]]]:
        with tempfile.TemporaryDirectory() as home:
            path = Path(home) / "p.db"
            async with await ProjectionStore.open(path) as store:
                for batch in batches:
                    await store.record_events(batch)
                tables = await store.dump()
            with contextlib.closing(sqlite3.connect(path)) as db:
                query = f"select {CATALOG} from agents order by address"  # noqa: S608
                tables["catalog"] = db.execute(query).fetchall()
                tables["recomputed"] = db.execute(RECOMPUTE).fetchall()
            return tables

    return asyncio.run(run())


@settings(max_examples=60, deadline=None)
@given(deliveries())
def test_the_merged_catalog_equals_a_recompute_from_every_event(
    delivery: tuple[list[Event], list[list[Event]]],
) -> None:
    events, batches = delivery
    tables = project(batches)
    assert tables["catalog"] == tables["recomputed"]
    assert tables == project([events])  # the decision seqs too, whatever the order


def test_an_old_file_gets_its_decision_seqs_from_its_events() -> None:
    """A projection written before the catalog was incremental is migrated: a batch that
    arrives late afterwards takes nothing back."""
    bodies: list[EventBody] = [TurnStarted("go", "helper", 2), Waiting(("x",)), TurnEnded("failed")]
    agent = [Event("acme.a", seq, 1, 1, T0, body) for seq, body in enumerate(bodies, start=1)]
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "p.db"
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.executescript(
                f"{MIGRATIONS[0]}; create table migrations (version integer primary key);"  # noqa: S608
                " insert into migrations values (1);"
            )
            db.executemany(
                "insert into events values (?, ?, ?, ?, ?, ?)",
                [(e.agent, e.seq, e.turn, str(e.body.__struct_config__.tag), e.at.isoformat(),
                  msgspec.json.encode(e)) for e in agent],
            )  # fmt: skip
            db.execute(
                "insert into agents values ('acme.a', 'acme', 'helper', 2, 'idle', 1, 3,"
                " 'failed', ?)",
                (T0.isoformat(),),
            )
        migrated = asyncio.run(_migrated_then_late(path, agent[1:2]))
    expected = project([agent])
    assert migrated == {table: expected[table] for table in migrated}


async def _migrated_then_late(path: Path, late: list[Event]) -> dict[str, list[tuple[Any, ...]]]:
    async with await ProjectionStore.open(path) as store:
        await store.record_events(late)
        return await store.dump()


def test_the_status_an_agent_decided_wins_at_its_seq_and_not_before() -> None:
    """The agent sends its status (derived from its turn's phase) with each batch; a later
    event of another batch still decides after it."""
    started = Event("acme.s", 1, 1, 0, T0, TurnStarted("hi", "k", 1))
    asked = Event("acme.s", 2, 1, 1, T0, ApprovalRequested("t1r1-c", "c", "ledger"))
    [told] = catalog_rows([started, asked], {"acme.s": Decided("parked", 2)})
    assert (told.status, told.status_seq) == ("parked", 2)
    [stale] = catalog_rows([started, asked], {"acme.s": Decided("idle", 1)})
    assert stale.status == "waiting"
