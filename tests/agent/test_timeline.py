"""How a wake's events reach the projection: handed over as steps return and flushes
happen, and made sure of by the wake's last flush (a write that journals nothing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from schemas.events import ModelMessage, ToolCalled, ToolFinished, TurnStarted
from schemas.projection import EventBatch
from schemas.state import Chunk, TimelineMark
from services.agent.store import Store
from services.agent.timeline import CHUNK_CHARS, CHUNK_EVENTS, Timeline

pytestmark = pytest.mark.anyio
ADDRESS = "acme.helper.one"
T = 1_764_460_800.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Journal:
    """The parts of a Restate context a timeline uses, recording what it was asked."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def set(self, key: str, value: Any) -> None:
        self.state[key] = value


class Live:
    def __init__(self, *, fails: bool = False) -> None:
        self.offered: list[EventBatch] = []
        self.written: list[EventBatch] = []
        self._fails = fails

    def offer(self, batch: EventBatch) -> None:
        self.offered.append(batch)

    async def write(self, batch: EventBatch) -> None:
        if self._fails:
            raise OSError("neither the projection nor Restate's ingress took the batch")
        self.written.append(batch)


def timeline(journal: Journal, live: Live) -> Timeline:
    ctx: Any = journal
    return Timeline(ADDRESS, TimelineMark(), live, Store(ctx).write_chunk)


async def clock() -> float:
    raise AssertionError("every event here has its time from a step")


def clock_at(at: float) -> Callable[[], Awaitable[float]]:
    async def read() -> float:
        return at

    return read


def seqs(batches: list[EventBatch]) -> list[list[int]]:
    return [[event.seq for event in batch.events] for batch in batches]


def chunks(journal: Journal) -> list[list[int]]:
    return [[e.seq for e in chunk.events] for chunk in journal.state.values()
            if isinstance(chunk, Chunk)]  # fmt: skip


async def a_round(line: Timeline) -> None:
    """A model step's reply, then a tool step: what `Rounds` adds and shows."""
    line.add(1, 1, TurnStarted("hi", "helper", 1), at=T)
    line.add(1, 1, ModelMessage("script", "", ()), at=T + 1)
    line.show()
    line.add(1, 1, ToolCalled("c1", "calculator", {}))
    line.stamp(T + 2)  # the tool step started
    line.add(1, 1, ToolFinished("c1", "calculator", "ok", "2"), at=T + 3)
    line.show()


async def test_events_are_shown_as_steps_return_and_written_as_one_chunk_at_the_end() -> None:
    journal, live = Journal(), Live()
    line = timeline(journal, live)
    await a_round(line)
    assert seqs(live.offered) == [[1, 2], [3, 4]]
    await line.flush("running", clock)
    assert seqs(live.offered) == [[1, 2], [3, 4]], "nothing is handed over twice"
    assert chunks(journal) == [], "a round's flush writes no chunk: the wake's end does"
    line.add(1, 2, ModelMessage("script", "done"), at=T + 4)
    await line.flush("idle", clock, last=True)
    assert chunks(journal) == [[1, 2, 3, 4, 5]]
    assert line.mark == TimelineMark(5, 1)


async def test_a_long_wake_writes_a_chunk_whenever_enough_events_wait() -> None:
    journal, live = Journal(), Live()
    line = timeline(journal, live)
    for round_ in range(1, 40):
        line.add(1, round_, ModelMessage("script", "", ()), at=T + round_)
        line.add(1, round_, ToolFinished("c1", "calculator", "ok", "2"), at=T + round_)
        line.show()
        await line.flush("running", clock)
    await line.flush("idle", clock, last=True)
    written = chunks(journal)
    assert [len(chunk) for chunk in written] == [CHUNK_EVENTS, 78 - CHUNK_EVENTS]
    assert [seq for chunk in written for seq in chunk] == list(range(1, 79))
    offered = [seq for batch in live.offered for seq in [e.seq for e in batch.events]]
    assert offered == list(range(1, 79)), "every event handed over once, in order"


async def test_large_results_are_written_as_a_chunk_before_the_wake_ends() -> None:
    journal, live = Journal(), Live()
    line = timeline(journal, live)
    big = "x" * (CHUNK_CHARS // 2)
    for round_ in range(1, 5):
        line.add(1, round_, ToolFinished("c1", "calculator", "ok", big), at=T + round_)
        line.show()
        await line.flush("running", clock)
    await line.flush("idle", clock, last=True)
    assert chunks(journal) == [[1, 2], [3, 4]], "no chunk holds more than CHUNK_CHARS of text"


async def test_observers_are_told_of_each_event_once_as_it_is_handed_over() -> None:
    journal, live = Journal(), Live()
    told: list[int] = []
    ctx: Any = journal
    line = Timeline(
        ADDRESS, TimelineMark(), live, Store(ctx).write_chunk, [lambda e: told.append(e.seq)]
    )
    await a_round(line)
    assert told == [1, 2, 3, 4]
    line.add(1, 2, ModelMessage("script", "done"))
    await line.flush("idle", clock_at(T + 5), last=True)
    assert told == [1, 2, 3, 4, 5]


async def test_an_event_without_a_time_waits_and_so_do_the_ones_after_it() -> None:
    journal, live = Journal(), Live()
    line = timeline(journal, live)
    line.add(1, 1, TurnStarted("hi", "helper", 1), at=T)
    line.add(1, 1, ToolCalled("c1", "calculator", {}))
    line.add(1, 1, ToolFinished("c1", "calculator", "ok", "2"), at=T + 3)
    line.show()
    assert seqs(live.offered) == [[1]]
    line.stamp(T + 2)
    await line.flush("running", clock)
    assert seqs(live.offered) == [[1], [2, 3]]
    times = [event.at.timestamp() for batch in live.offered for event in batch.events]
    assert times == [T, T + 2, T + 3]


async def test_the_last_flush_writes_every_event_of_the_wake_and_journals_only_the_chunk() -> None:
    journal, live = Journal(), Live()
    line = timeline(journal, live)
    await a_round(line)
    await line.flush("running", clock)
    line.add(1, 2, ModelMessage("script", "done"), at=T + 4)
    await line.flush("idle", clock, last=True)
    assert seqs(live.written) == [[1, 2, 3, 4, 5]]
    assert live.written[0].status == "idle"
    assert list(journal.state) == ["timeline.0"], "no step: only the chunk"
    assert line.mark == TimelineMark(5, 1)


async def test_a_last_write_that_fails_fails_the_flush_and_sends_nothing() -> None:
    """Neither the projection nor the `Projector` took the events: the wake's attempt
    fails (Restate retries it, and the replay writes them again)."""
    journal, live = Journal(), Live(fails=True)
    line = timeline(journal, live)
    await a_round(line)
    with pytest.raises(OSError, match="neither the projection"):
        await line.flush("idle", clock, last=True)
    assert chunks(journal) == [[1, 2, 3, 4]], "the chunk is written before the projection"


async def test_a_wake_that_adds_nothing_writes_nothing() -> None:
    journal, live = Journal(), Live()
    await timeline(journal, live).flush("idle", clock, last=True)
    assert (journal.state, live.offered, live.written) == ({}, [], [])
