"""The arrivals benchmark's arithmetic and its checks, without a stack."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench import BenchError
from bench.arrivals import _lateness, percentiles
from schemas.events import Event, EventBody, ScheduleFired, TurnEnded, TurnStarted

PLANNED = datetime(2026, 12, 2, 9, tzinfo=UTC)


def event(agent: str, seq: int, late_ms: float, body: EventBody) -> Event:
    return Event(agent, seq, 1, 0, PLANNED + timedelta(milliseconds=late_ms), body)


def run(late_ms: list[float], *, outcome: str = "succeeded") -> list[Event]:
    events = []
    for n, late in enumerate(late_ms):
        agent = f"bench.s{n}"
        sent = PLANNED + timedelta(milliseconds=late / 2)
        events += [
            event(agent, 1, late, ScheduleFired("s1", PLANNED, sent=sent)),
            event(agent, 2, late, TurnStarted("tick", "bench-clock", 1)),
            event(agent, 3, late + 5, TurnEnded(outcome)),  # type: ignore[arg-type]
        ]
    return events


def test_percentiles_are_nearest_rank() -> None:
    figures = percentiles([float(n) for n in range(1, 101)])
    assert figures == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}


def test_lateness_is_planned_against_sent_and_against_the_turns_start() -> None:
    figures = _lateness(run([100.0, 200.0, 300.0, 400.0]), PLANNED, 4)
    assert figures["sent_ms"]["p50"] == pytest.approx(100.0)
    assert figures["turn_started_ms"]["max"] == pytest.approx(400.0)


def test_a_run_with_a_turn_missing_or_failed_gives_no_figures() -> None:
    with pytest.raises(BenchError, match="3 fires, 3 turns, 0 failed of 4"):
        _lateness(run([1.0, 2.0, 3.0]), PLANNED, 4)
    with pytest.raises(BenchError, match="1 failed"):
        _lateness(run([1.0], outcome="failed"), PLANNED, 1)
