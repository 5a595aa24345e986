"""Schedules on a real restate-server: fires and their turns, a fire after downtime,
removal, and the skip policy while a turn runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.events import Event, ScheduleFired, ScheduleSkipped, TurnEnded, TurnStarted
from schemas.schedule import At, Every, Schedule, ScheduleRef, ScheduleSpec
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.contracts import ADD_SCHEDULE, LIST_SCHEDULES, REMOVE_SCHEDULE, Empty
from services.executor.scripted import script
from services.ingress import IngressError
from tests.durable.conftest import LiveStack, eventually, live_stack, stack_settings

pytestmark = pytest.mark.durable

SPEC = AgentSpec(kind="clock", instructions="Follow the script.", model="script")
OUTAGE = 10.0
"""Seconds the endpoint stays down: the outage under test, not a wait for something."""


@pytest.fixture(scope="module")
def clock_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    settings = stack_settings(Path(tmp_path_factory.mktemp("home")))
    settings = settings.model_copy(update={"schedule_min_seconds": 1.0, "tenant_schedules": 4})
    with live_stack(settings) as live:
        yield live


def fires(
    stack: LiveStack, address: str, schedule: str, *, shown: bool = False
) -> list[ScheduleFired]:
    """From the object, or (`shown`) from the projection, which a stopped endpoint leaves
    readable."""
    events = stack.shown(address) if shown else stack.events(address)
    return [
        e.body for e in events if isinstance(e.body, ScheduleFired) and e.body.schedule == schedule
    ]


def wait_for_fires(
    stack: LiveStack, address: str, schedule: str, count: int
) -> list[ScheduleFired]:
    def enough() -> list[ScheduleFired] | None:
        found = fires(stack, address, schedule)
        return found if len(found) >= count else None

    return eventually(enough, 90.0, f"{count} fires of {schedule}")


def add(stack: LiveStack, address: str, spec: ScheduleSpec) -> Schedule:
    return stack.ingress.call(ADD_SCHEDULE, spec, address)


def ended_turns(events: list[Event]) -> list[int]:
    return [e.turn for e in events if isinstance(e.body, TurnEnded)]


def test_a_schedule_every_two_seconds_fires_and_its_turns_run(
    clock_stack: LiveStack, address: str
) -> None:
    clock_stack.ingress.message(address, "hello", SPEC)
    made = add(clock_stack, address, ScheduleSpec("tick", Every(2.0)))
    assert made.next_at is not None

    wait_for_fires(clock_stack, address, made.id, 2)
    clock_stack.wait_for_turn_end(address, 3)

    events = clock_stack.events(address)
    fired = [e for e in events if isinstance(e.body, ScheduleFired)]
    started = {e.turn: e.body for e in events if isinstance(e.body, TurnStarted)}
    for event in fired[:2]:
        assert isinstance(event.body, ScheduleFired)
        assert event.body.missed == 0
        turn = started[event.turn]
        assert turn.text == "tick"
        assert turn.message_id.startswith(f"{made.id}@")
    ended = [e.body for e in events if isinstance(e.body, TurnEnded) and e.turn in (2, 3)]
    assert [(b.outcome, b.reply) for b in ended] == [("succeeded", "You said: tick")] * 2
    first, second = (f.body.planned for f in fired[:2] if isinstance(f.body, ScheduleFired))
    assert (second - first).total_seconds() == pytest.approx(2.0)
    listed = clock_stack.ingress.call(LIST_SCHEDULES, Empty(), address).schedules
    assert [s.id for s in listed] == [made.id]
    assert listed[0].fired >= 2
    assert listed[0].next_at is not None
    assert listed[0].next_at > second
    clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(made.id), address)


def test_a_removed_schedule_never_fires_again(clock_stack: LiveStack, address: str) -> None:
    clock_stack.ingress.message(address, "hello", SPEC)
    gone = add(clock_stack, address, ScheduleSpec("first", Every(1.0)))
    wait_for_fires(clock_stack, address, gone.id, 1)
    clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(gone.id), address)
    after_removal = len(fires(clock_stack, address, gone.id))

    # A second schedule's three fires span three periods of the removed one.
    kept = add(clock_stack, address, ScheduleSpec("second", Every(1.0)))
    wait_for_fires(clock_stack, address, kept.id, 3)

    assert len(fires(clock_stack, address, gone.id)) == after_removal
    listed = clock_stack.ingress.call(LIST_SCHEDULES, Empty(), address).schedules
    assert [s.id for s in listed] == [kept.id]
    clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(kept.id), address)


def test_after_the_endpoint_was_killed_a_schedule_fires_once_for_the_gap(
    clock_stack: LiveStack, address: str
) -> None:
    clock_stack.ingress.message(address, "hello", SPEC)
    made = add(clock_stack, address, ScheduleSpec("tick", Every(2.0)))
    wait_for_fires(clock_stack, address, made.id, 1)

    clock_stack.endpoint.kill()
    killed = time.monotonic()
    down = len(fires(clock_stack, address, made.id, shown=True))
    time.sleep(OUTAGE)
    clock_stack.endpoint.start()

    found = wait_for_fires(clock_stack, address, made.id, down + 2)
    late, next_one = found[down], found[down + 1]
    # Every planned fire of the outage (and of the restart) is in one fire: at least
    # those of the ten seconds down, at most those since the kill.
    assert OUTAGE / 2 - 2 <= late.missed <= (time.monotonic() - killed) / 2, late
    assert f"{late.missed} planned fires" in late.note
    assert next_one.missed == 0
    gap = (next_one.planned - late.planned).total_seconds()
    assert gap >= 2.0 * (late.missed + 1)
    events = clock_stack.events(address)
    assert ended_turns(events) == sorted(set(ended_turns(events)))
    clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(made.id), address)


def test_a_skipping_schedule_records_a_skip_while_a_turn_runs(
    clock_stack: LiveStack, address: str
) -> None:
    clock_stack.ingress.message(address, "hello", SPEC)
    clock_stack.ingress.send_wake(address, Message(script({"sleep": 8.0, "reply": "slow"})))
    eventually(
        lambda: clock_stack.ingress.status(address).state == "running" or None,
        30.0,
        "the slow turn to run",
    )
    made = add(clock_stack, address, ScheduleSpec("tick", Every(1.0), while_busy="skip"))

    def skipped() -> list[ScheduleSkipped] | None:
        found = [e.body for e in clock_stack.events(address) if isinstance(e.body, ScheduleSkipped)]
        return found or None

    first = eventually(skipped, 60.0, "a skip")[0]
    assert first.schedule == made.id
    clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(made.id), address)
    events = clock_stack.events(address)
    slow = next(e.turn for e in events if isinstance(e.body, TurnEnded) and e.body.reply == "slow")
    assert not [
        e
        for e in events
        if isinstance(e.body, TurnStarted) and e.body.text == "tick" and e.turn <= slow
    ]


def test_an_interrupting_schedule_stops_the_running_turn_and_runs_its_own(
    clock_stack: LiveStack, address: str
) -> None:
    """A fire is a message like any other: its `while_busy` does what a message's does."""
    clock_stack.ingress.message(address, "hello", SPEC)
    clock_stack.ingress.send_wake(address, Message(script({"sleep": 60, "reply": "never"})))
    eventually(
        lambda: clock_stack.ingress.status(address).state == "running" or None,
        30.0,
        "the slow turn to run",
    )
    soon = datetime.now(UTC) + timedelta(seconds=2)  # noqa: TID251 - the test's clock
    add(clock_stack, address, ScheduleSpec("now this", At(soon), while_busy="interrupt"))

    slow = clock_stack.wait_for_turn_end(address, 2, timeout=30)
    assert slow.outcome == "stopped"
    mine = clock_stack.wait_for_turn_end(address, 3, timeout=30)
    assert (mine.outcome, mine.reply) == ("succeeded", "You said: now this")
    assert clock_stack.ingress.call(LIST_SCHEDULES, Empty(), address).schedules == ()


def test_a_tenants_agents_have_at_most_their_ceiling_of_schedules_together(
    clock_stack: LiveStack,
) -> None:
    first, second = "capped.one", "capped.two"
    for agent in (first, second):
        clock_stack.ingress.message(agent, "hello", SPEC)
    made = [
        add(clock_stack, agent, ScheduleSpec("later", Every(3600.0)))
        for agent in (first, first, second, second)
    ]
    with pytest.raises(IngressError) as refused:
        add(clock_stack, second, ScheduleSpec("one more", Every(3600.0)))
    assert refused.value.status == 429
    assert "TEASPILL_TENANT_SCHEDULES" in refused.value.message
    clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(made[0].id), first)
    again = add(clock_stack, second, ScheduleSpec("one more", Every(3600.0)))
    for agent in (first, second):
        for schedule in clock_stack.ingress.call(LIST_SCHEDULES, Empty(), agent).schedules:
            clock_stack.ingress.call(REMOVE_SCHEDULE, ScheduleRef(schedule.id), agent)
    assert again.id == "s3"
