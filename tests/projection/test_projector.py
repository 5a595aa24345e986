"""The projector's writer: concurrent batches share one transaction, and each invocation
returns only once its own records are committed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from schemas.events import Event
from schemas.projection import EventBatch
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, PublishedSpec
from services.ingress import AsyncIngress, IngressError
from services.projection.postgres import PostgresStore
from services.projection.projector import (
    Overflow,
    Projection,
    ProjectionClosedError,
    Tell,
    through_ingress,
)
from services.projection.store import ProjectionStore
from services.projection.stores import ReadSide
from tests.fixtures.postgres import Cluster
from tests.projection.test_store import T0, timeline

AGENTS = [f"acme.agent-{n}" for n in range(50)]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Transactions:
    """Counts either store's `record` calls (each one transaction) around the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.gate = asyncio.Event()
        """The first transaction waits for it."""
        self.gate.set()
        self.entered = asyncio.Event()
        for kind in (ProjectionStore, PostgresStore):
            monkeypatch.setattr(kind, "record", self._counted(kind.record))

    def _counted(self, real: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        async def record(store: ReadSide, events: Any = (), *rest: Any) -> None:
            self.sizes.append(len(events))
            self.entered.set()
            if len(self.sizes) == 1:
                await self.gate.wait()
            await real(store, events, *rest)

        return record


class Target:
    """Where the tests' `Projection` writes: SQLite's file, or a PostgreSQL database."""

    def __init__(self, folder: Path, urls: Callable[[], str] | None) -> None:
        self.folder = folder
        self._urls = urls
        self.url = urls() if urls is not None else ""

    def projection(self, tell: Tell | None = None, overflow: Overflow | None = None) -> Projection:
        return Projection(self.folder / "p.db", tell, overflow, url=self.url)

    async def _open(self, reference: bool = False) -> ReadSide:
        if self._urls is None:
            return await ProjectionStore.open(self.folder / ("ref.db" if reference else "p.db"))
        return await PostgresStore.open(self._urls() if reference else self.url)

    async def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        async with await self._open() as store:
            return await store.dump()

    async def status_of(self, agent: str) -> str | None:
        async with await self._open() as store:
            row = await store.agent(agent)
        return row.status if row is not None else None

    async def timeline_of(self, agent: str) -> list[Event]:
        async with await self._open() as store:
            return await store.timeline(agent)

    async def one_by_one(self, batches: list[list[Event]]) -> dict[str, list[tuple[Any, ...]]]:
        """The tables of another store of the same kind, after `batches` one by one."""
        async with await self._open(reference=True) as store:
            for batch in batches:
                await store.record_events(batch)
            return await store.dump()


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "sqlite":
        yield Target(tmp_path, None)
        return
    server: Cluster = request.getfixturevalue("postgres")
    with server.databases():
        yield Target(tmp_path, server.database)


async def test_fifty_agents_batches_sent_at_once_are_one_transaction(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = [timeline(agent, 2) for agent in AGENTS]
    told: list[Mapping[str, int]] = []
    projection = target.projection(told.append)
    transactions = Transactions(monkeypatch)
    await asyncio.gather(*(projection.record(events=batch) for batch in batches))
    await projection.close()
    assert transactions.sizes == [6 * len(AGENTS)]
    assert told == [dict.fromkeys(AGENTS, 6)]
    assert await target.dump() == await target.one_by_one(batches)


async def test_batches_arriving_while_a_commit_runs_share_the_next_one(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection = target.projection()
    transactions = Transactions(monkeypatch)
    transactions.gate.clear()
    first = asyncio.create_task(projection.record(events=timeline("acme.first", 1)))
    await transactions.entered.wait()  # the writer is in the first transaction
    later = [
        asyncio.create_task(projection.record(events=timeline(agent, 1))) for agent in AGENTS[:10]
    ]
    await asyncio.sleep(0.01)
    assert transactions.sizes == [3]
    transactions.gate.set()
    await asyncio.gather(first, *later)
    await projection.close()
    assert transactions.sizes == [3, 30]


async def test_specs_keys_and_events_of_many_invocations_commit_together(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection = target.projection()
    transactions = Transactions(monkeypatch)
    spec = PublishedSpec("acme", AgentSpec("helper", "Help.", version=1), T0)
    key = ApiKey("k1", "acme", "read", "h1", T0)
    await asyncio.gather(
        projection.record(specs=(spec,)),
        projection.record(keys=(key,)),
        projection.record(events=timeline("acme.a", 1)),
    )
    await projection.close()
    assert len(transactions.sizes) == 1
    tables = await target.dump()
    assert (len(tables["specs"]), len(tables["keys"]), len(tables["events"])) == (1, 1, 3)


async def test_a_batch_that_cannot_be_written_fails_alone(target: Target) -> None:
    projection = target.projection()
    bad = [Event("not an address", 1, 1, 1, T0, timeline("acme.a", 1)[0].body)]
    results = await asyncio.gather(
        projection.record(events=timeline("acme.a", 1)),
        projection.record(events=bad),
        projection.record(events=timeline("acme.b", 1)),
        return_exceptions=True,
    )
    await projection.close()
    assert results[0] is None
    assert results[2] is None
    assert "agent address" in str(results[1])
    tables = await target.dump()
    assert [row[0] for row in tables["agents"]] == ["acme.a", "acme.b"]


async def test_a_cancelled_invocation_still_has_its_batch_committed(target: Target) -> None:
    projection = target.projection()
    waiting = asyncio.create_task(projection.record(events=timeline("acme.a", 1)))
    await asyncio.sleep(0)
    waiting.cancel()
    await projection.record(events=timeline("acme.b", 1))
    await projection.close()
    assert [row[0] for row in (await target.dump())["agents"]] == ["acme.a", "acme.b"]


async def test_a_closed_projection_refuses_writes_so_restate_retries_them(target: Target) -> None:
    projection = target.projection()
    await projection.record(events=timeline("acme.a", 1))
    await projection.close()
    with pytest.raises(RuntimeError, match="closed"):
        await projection.record(events=timeline("acme.b", 1))


async def test_offered_batches_are_committed_without_anyone_waiting(target: Target) -> None:
    told: list[Mapping[str, int]] = []
    projection = target.projection(told.append)
    events = timeline("acme.a", 2)
    projection.offer(EventBatch(tuple(events[:3]), "running"))
    projection.offer(EventBatch(tuple(events[3:]), "waiting"))
    await projection.record(events=timeline("acme.b", 1))  # queued behind the offers
    await projection.close()
    tables = await target.dump()
    assert len(tables["events"]) == 9
    assert await target.status_of("acme.a") == "waiting"
    assert {agent: seq for notice in told for agent, seq in notice.items()} == {
        "acme.a": 6,
        "acme.b": 3,
    }


async def test_an_offer_that_cannot_be_written_is_logged_and_fails_nothing_else(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    projection = target.projection()
    bad = Event("not an address", 1, 1, 1, T0, timeline("acme.a", 1)[0].body)
    projection.offer(EventBatch((bad,), "running"))
    await projection.write(EventBatch(tuple(timeline("acme.b", 1)), "idle"))
    await projection.close()
    assert "was not projected" in caplog.text
    assert [row[0] for row in (await target.dump())["agents"]] == ["acme.b"]


async def test_an_offer_to_a_closed_projection_is_dropped(target: Target) -> None:
    projection = target.projection()
    await projection.close()
    projection.offer(EventBatch(tuple(timeline("acme.a", 1)), "running"))
    with pytest.raises(ProjectionClosedError):
        await projection.write(EventBatch(tuple(timeline("acme.a", 1)), "running"))


async def test_a_wakes_last_write_that_the_projection_cannot_take_goes_to_the_overflow(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whole, with the status it decides: the `Projector` writes it once the file works."""
    (tmp_path / "not a directory").write_text("")
    handed: list[EventBatch] = []

    async def overflow(batch: EventBatch) -> None:
        handed.append(batch)

    projection = Projection(tmp_path / "not a directory" / "p.db", overflow=overflow)
    events = tuple(timeline("acme.a", 1))
    projection.offer(EventBatch(events[:1], "running"))
    await projection.write(EventBatch(events, "idle"))
    assert handed == [EventBatch(events, "idle")]
    assert "acme.a's events go to the Projector" in caplog.text


async def test_a_last_write_that_is_committed_is_not_handed_over(target: Target) -> None:
    handed: list[EventBatch] = []

    async def overflow(batch: EventBatch) -> None:
        handed.append(batch)

    projection = target.projection(overflow=overflow)
    await projection.write(EventBatch(tuple(timeline("acme.a", 1)), "idle"))
    await projection.close()
    assert handed == []
    assert len((await target.dump())["events"]) == 3


async def test_through_ingress_sends_the_batch_one_way_to_its_agents_projector() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(202, json={"invocationId": "inv_1", "status": "Accepted"})

    ingress = AsyncIngress("http://ingress.test", transport=httpx.MockTransport(answer))
    batch = EventBatch(tuple(timeline("acme.a", 1)), "idle")
    await through_ingress(ingress)(batch)
    await ingress.close()
    assert [request.url.path for request in sent] == ["/Projector/acme.a/events/send"]
    assert msgspec.json.decode(sent[0].content, type=EventBatch) == batch


async def test_through_ingress_raises_when_restate_refuses() -> None:
    """Then the wake's attempt fails and Restate retries it: its events are not lost."""
    ingress = AsyncIngress(
        "http://ingress.test", transport=httpx.MockTransport(lambda _: httpx.Response(503))
    )
    with pytest.raises(IngressError, match="503"):
        await through_ingress(ingress)(EventBatch(tuple(timeline("acme.a", 1)), "idle"))
    await ingress.close()


async def test_a_wakes_last_write_and_its_offers_in_one_group_insert_each_event_once(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection = target.projection()
    transactions = Transactions(monkeypatch)
    events = tuple(timeline("acme.a", 2))  # the last one, seq 6, is `waiting`
    projection.offer(EventBatch(events[:3], "running"))
    projection.offer(EventBatch(events[3:5], "running"))
    await projection.write(EventBatch(events, "waiting"))
    await projection.close()
    assert transactions.sizes == [6]
    assert await target.status_of("acme.a") == "waiting"


async def test_a_wakes_last_write_skips_what_its_offers_already_committed(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection = target.projection()
    transactions = Transactions(monkeypatch)
    events = tuple(timeline("acme.a", 2))  # the last one, seq 6, is `waiting`
    projection.offer(EventBatch(events[:4], "running"))
    await projection.record(events=timeline("acme.b", 1))  # after the offer's commit
    await projection.write(EventBatch(events, "waiting"))
    await projection.close()
    assert transactions.sizes == [7, 2], "seqs 5 and 6: the one not offered, and the last"
    assert await target.timeline_of("acme.a") == list(events)
    assert await target.status_of("acme.a") == "waiting"


async def test_a_replaced_file_gets_every_event_of_the_last_write(target: Target) -> None:
    projection = target.projection()
    events = tuple(timeline("acme.a", 2))
    projection.offer(EventBatch(events[:4], "running"))
    await projection.record(events=timeline("acme.b", 1))
    await projection.replace(lambda store: store.record_events(timeline("acme.b", 1)))
    await projection.write(EventBatch(events, "waiting"))
    await projection.close()
    assert await target.timeline_of("acme.a") == list(events)
