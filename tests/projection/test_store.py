"""The projection store, SQLite's and PostgreSQL's alike: idempotent under duplicated and
reordered events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.events import (
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    EventBody,
    ModelMessage,
    TurnEnded,
    TurnParked,
    TurnStarted,
    Waiting,
)
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, PublishedSpec
from tests.fixtures.postgres import Cluster
from tests.projection.conftest import PostgresStores, SqliteStores, Stores

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def timeline(agent: str, turns: int) -> list[Event]:
    bodies: list[tuple[int, EventBody]] = []
    for turn in range(1, turns + 1):
        bodies += [
            (turn, TurnStarted(f"message {turn}", "helper", turn)),
            (turn, ModelMessage("script", f"reply {turn}")),
            (turn, Waiting(("x.y.z",)) if turn == turns else TurnEnded("succeeded", "ok")),
        ]
    return [
        Event(agent, seq, turn, 1, T0 + timedelta(seconds=seq), body)
        for seq, (turn, body) in enumerate(bodies, start=1)
    ]


EVENTS = timeline("acme.a", 3) + timeline("acme.b", 2) + timeline("other.c", 1)


def project(stores: Stores, batches: list[list[Event]]) -> dict[str, list[tuple[Any, ...]]]:
    """The tables of a new store after `batches`, recorded one by one."""

    async def run() -> dict[str, list[tuple[Any, ...]]]:
        async with await stores.fresh() as store:
            for batch in batches:
                await store.record_events(batch)
            return await store.dump()

    return asyncio.run(run())


_EXPECTED: dict[str, dict[str, list[tuple[Any, ...]]]] = {}


def expected(stores: Stores) -> dict[str, list[tuple[Any, ...]]]:
    """The tables after every event of `EVENTS` once, in order (per kind of store)."""
    if stores.kind not in _EXPECTED:
        _EXPECTED[stores.kind] = project(stores, [EVENTS])
    return _EXPECTED[stores.kind]


# Each example opens a store of its own from the fixture's factory.
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(EVENTS), min_size=len(EVENTS)).flatmap(st.permutations))
def test_duplicated_and_shuffled_events_give_the_same_tables(
    stores: Stores, events: list[Event]
) -> None:
    shuffled = events + EVENTS[::-1]
    batches = [shuffled[i : i + 4] for i in range(0, len(shuffled), 4)]
    assert project(stores, batches) == expected(stores)


def test_both_stores_hold_the_same_rows(postgres: Cluster, tmp_path: Path) -> None:
    """The PostgreSQL store's tables, as `dump` reads them, are SQLite's row for row."""
    assert project(PostgresStores(postgres), [EVENTS]) == project(SqliteStores(tmp_path), [EVENTS])


def test_the_catalog_follows_the_newest_event_that_decides_status(stores: Stores) -> None:
    agents = {row[0]: row for row in expected(stores)["agents"]}
    _, tenant, kind, version, status, turn, last_seq, outcome, _ = agents["acme.a"][:9]
    assert (tenant, kind, version, status, turn, last_seq) == ("acme", "helper", 3, "waiting", 3, 9)
    assert outcome == "succeeded"
    assert agents["acme.b"][4] == "waiting"


def test_reads_are_scoped_and_paginated(stores: Stores) -> None:
    async def run() -> None:
        async with await stores.fresh() as store:
            await store.record_events(EVENTS)
            first = await store.agents("acme", limit=1)
            rest = await store.agents("acme", after=first[-1].address)
            assert [a.address for a in first + rest] == ["acme.a", "acme.b"]
            assert await store.agents("acme", status="idle") == []
            page = await store.timeline("acme.a", after_seq=2, limit=3)
            assert [e.seq for e in page] == [3, 4, 5]
            assert await store.agent("nobody.here") is None

    asyncio.run(run())


def test_specs_and_keys_are_upserts_and_a_revocation_sticks(stores: Stores) -> None:
    async def run() -> None:
        async with await stores.fresh() as store:
            for version in (1, 2, 2):
                spec = AgentSpec(kind="helper", instructions=f"v{version}", version=version)
                await store.record_spec(PublishedSpec("acme", spec, T0))
            latest = await store.latest_spec("acme", "helper")
            assert latest is not None
            assert latest.instructions == "v2"
            assert len(await store.specs("acme")) == 2
            key = ApiKey("k1", "acme", "read", "h1", T0)
            await store.record_key(key)
            await store.record_key(ApiKey("k1", "acme", "read", "h1", T0, revoked_at=T0))
            await store.record_key(key)
            found = await store.key_by_hash("h1")
            assert found is not None
            assert found.revoked_at == T0

    asyncio.run(run())


def test_migrations_run_once_and_a_reopened_store_keeps_its_rows(stores: Stores) -> None:
    async def run() -> None:
        async with await stores.fresh() as store:
            await store.record_events(EVENTS[:3])
        async with await stores.again() as store:
            assert len(await store.timeline("acme.a")) == 3

    asyncio.run(run())


def test_a_parked_turn_shows_in_the_catalog_until_its_answer_resumes_it(stores: Stores) -> None:
    bodies: list[EventBody] = [
        TurnStarted("go", "guarded", 1),
        ApprovalRequested("t1r1-call_0", "call_0", "ledger"),
        TurnParked("t1r1-call_0"),
    ]
    parked = [Event("acme.p", i, 1, 1, T0, b) for i, b in enumerate(bodies, start=1)]
    resumed = [
        *parked,
        Event("acme.p", 4, 1, 1, T0, ApprovalAnswered("t1r1-call_0", True)),
        Event("acme.p", 5, 1, 1, T0, TurnEnded("succeeded", "done")),
    ]
    statuses = [
        next(row for row in project(stores, [events])["agents"] if row[0] == "acme.p")[4]
        for events in (parked[:2], parked, resumed[:4], resumed)
    ]
    assert statuses == ["waiting", "parked", "running", "idle"]


def test_a_timeline_read_stops_at_the_first_event_not_written_yet(stores: Stores) -> None:
    async def run() -> tuple[list[int], list[int], list[int]]:
        async with await stores.fresh() as store:
            a = timeline("acme.a", 3)
            await store.record_events([*a[:3], *a[4:6]])
            early = [e.seq for e in await store.timeline("acme.a")]
            stuck = [e.seq for e in await store.timeline("acme.a", after_seq=3)]
            await store.record_events([a[3]])
            later = [e.seq for e in await store.timeline("acme.a", after_seq=3)]
            return early, stuck, later

    assert asyncio.run(run()) == ([1, 2, 3], [], [4, 5, 6])
