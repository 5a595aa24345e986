"""What an agent records of its schedules: a fire before the turn it starts or the queued
message, a skip on its own."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from schemas.events import MessageQueued, ScheduleFired, ScheduleSkipped, TurnStarted
from schemas.wake import Fired, Message, ScheduleSkip
from services.agent.machine import BUSY, Emit, react
from tests.agent.test_machine import IDLE, ME, PHASES, bodies, kinds, running

PLANNED = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def test_a_fire_is_recorded_before_the_turn_it_starts() -> None:
    fired = Message("tick", id="s1@x", schedule=Fired("s1", PLANNED))
    reaction = react(ME, IDLE, fired)
    assert kinds(reaction) == ["Emit", "Drive"]
    assert bodies(reaction) == [
        ScheduleFired("s1", PLANNED),
        TurnStarted("tick", "helper", 0, None, "s1@x"),
    ]
    first = reaction.effects[0]
    assert isinstance(first, Emit)
    assert (first.turn, first.round) == (2, 0)


def test_a_late_fire_says_how_many_fires_it_stands_for() -> None:
    reaction = react(ME, IDLE, Message("tick", schedule=Fired("s1", PLANNED, missed=4)))
    fired = bodies(reaction)[0]
    assert isinstance(fired, ScheduleFired)
    assert fired.missed == 4
    assert "4 planned fires" in fired.note


def test_a_fire_that_finds_a_turn_waiting_is_recorded_and_queued() -> None:
    reaction = react(
        ME, PHASES["awaiting children"], Message("tick", schedule=Fired("s1", PLANNED))
    )
    assert bodies(reaction) == [ScheduleFired("s1", PLANNED), MessageQueued("tick")]
    assert len(reaction.record.queue) == 1


def test_a_skip_is_recorded_under_the_turn_in_progress_and_changes_nothing() -> None:
    record = running()
    reaction = react(ME, record, ScheduleSkip("s2", PLANNED))
    assert bodies(reaction) == [ScheduleSkipped("s2", PLANNED, BUSY)]
    assert reaction.record == record
    emitted = reaction.effects[0]
    assert isinstance(emitted, Emit)
    assert emitted.turn == 1


def test_a_skip_that_arrives_after_the_turn_ended_is_recorded_under_that_turn() -> None:
    reaction = react(ME, IDLE, ScheduleSkip("s2", PLANNED))
    emitted = reaction.effects[0]
    assert isinstance(emitted, Emit)
    assert emitted.turn == IDLE.turns
    assert msgspec.structs.replace(reaction.record) == IDLE
