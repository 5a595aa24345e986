"""The runner's logic against a fake gateway: the concurrency bound, finding a case's own
turn among other events, and a case that runs out of time (real-stack runs are in
tests/durable/test_evals.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from schemas.events import Event, EventBody, TurnEnded, TurnStarted
from services.client import Accepted, AsyncClient
from services.evals.graders import OutcomeIs, ReplyContains
from services.evals.runner import Planned, converse, run_suite
from services.evals.suite import Case, Suite

pytestmark = pytest.mark.anyio

AT = datetime(2026, 1, 2, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Gateway:
    """Answers each message with a turn that ends `You said: <text>` once `release` is
    set; counts how many turns are in flight at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.two_waiting = asyncio.Event()
        self.running = 0
        self.most = 0
        self.stopped: list[str] = []
        self.timelines: dict[str, list[Event]] = {}

    def _add(self, address: str, turn: int, body: EventBody) -> None:
        line = self.timelines.setdefault(address, [])
        line.append(Event(address, len(line) + 1, turn, 0, AT, body))

    async def send(self, address: str, text: str, *, kind: str) -> Accepted:
        line = self.timelines.setdefault(address, [])
        after = len(line)
        turn = sum(1 for e in line if isinstance(e.body, TurnStarted)) + 1
        # Another sender's turn first: the case must follow its own message's turn.
        self._add(address, turn, TurnStarted("someone else", kind, 1, message_id="other"))
        self._add(address, turn, TurnEnded("succeeded", reply="not yours"))
        self._add(address, turn + 1, TurnStarted(text, kind, 1, message_id=f"m{after}"))
        return Accepted(address, after, "", message_id=f"m{after}")

    async def follow(self, address: str, *, after: int = 0) -> AsyncGenerator[Event, None]:
        for event in self.timelines[address][after:]:
            yield event
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= 2:
            self.two_waiting.set()
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        last = self.timelines[address][-1]
        assert isinstance(last.body, TurnStarted)
        self._add(address, last.turn, TurnEnded("succeeded", reply=f"You said: {last.body.text}"))
        yield self.timelines[address][-1]

    async def stop(self, address: str) -> None:
        self.stopped.append(address)


def planned(n: int) -> list[Planned]:
    case = Case(f"c{n}", ("hello",), (ReplyContains("You said: hello"), OutcomeIs("succeeded")))
    return [Planned(case, f"evals.c{n}", "clerk", "clerk@0")]


async def test_at_most_concurrency_cases_run_at_once_and_each_reads_its_own_turn() -> None:
    gateway = Gateway()
    suite = Suite(Path("x.toml"), "d", (), concurrency=2, timeout=30)
    plans = [p for n in range(5) for p in planned(n)]
    run = asyncio.create_task(run_suite(cast(AsyncClient, gateway), suite, plans, "now"))
    await gateway.two_waiting.wait()
    # Yield to the loop (no clock involved) long enough for a third case to start if the
    # bound did not hold.
    for _ in range(50):
        await asyncio.sleep(0)
    assert gateway.running == 2
    gateway.release.set()
    report = await run
    assert gateway.most == 2
    assert report.passed == report.total == 5
    assert {c.reply for c in report.cases} == {"You said: hello"}


async def test_a_case_out_of_time_is_stopped_and_keeps_what_it_recorded() -> None:
    gateway = Gateway()
    seen = await converse(cast(AsyncClient, gateway), "evals.slow", "clerk", ("hi",), 0.05)
    assert (seen.outcome, seen.problem) == ("timed_out", "the case did not finish within 0.05 s")
    assert gateway.stopped == ["evals.slow"]
    assert [type(e.body) for e in seen.events] == [TurnStarted]
    assert seen.events[0].body == TurnStarted("hi", "clerk", 1, message_id="m0")
