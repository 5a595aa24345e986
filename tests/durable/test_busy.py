"""A message that arrives while a turn runs (`while_busy`), and pause and resume, through
a real restate-server with the scripted model."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from schemas.events import (
    AgentPaused,
    AgentResumed,
    ChildReported,
    Event,
    MessageQueued,
    MessageSteered,
    ModelMessage,
    ScheduleFired,
    ToolFinished,
    TurnEnded,
    TurnStarted,
)
from schemas.schedule import At, ScheduleSpec
from schemas.spec import AgentSpec
from schemas.wake import Message, Pause, Resume
from services.contracts import ADD_SCHEDULE, PAUSE
from services.executor.scripted import script
from tests.durable.conftest import LiveStack, eventually

pytestmark = pytest.mark.durable

SPEC = AgentSpec(
    kind="busy", instructions="Follow the script.", model="script", tools=("calculator",)
)
CALCULATE = {"name": "calculator", "arguments": {"expression": "6*7"}}
ROUND = 5
"""Seconds of the slow round a second message arrives in: ample for the `arrived` handler
(or `pause`) to reach the running turn before the round's boundary on a loaded machine."""


def of(stack: LiveStack, address: str, kind: type) -> list[Any]:
    """The events of `kind` as UIs read them (each as soon as its step returned)."""
    return [e.body for e in stack.shown(address) if isinstance(e.body, kind)]


def turns(events: list[Event]) -> list[tuple[int, str]]:
    return [(e.turn, e.body.outcome) for e in events if isinstance(e.body, TurnEnded)]


def started(stack: LiveStack, address: str) -> None:
    """The first turn's model step is under way (its first events are shown)."""
    eventually(lambda: of(stack, address, TurnStarted) or None, 30, "the turn to start")


def test_queue_runs_after_the_running_turn(stack: LiveStack, address: str) -> None:
    slow = script({"sleep": ROUND, "reply": "slow one"})
    stack.ingress.send_message(address, Message(slow, spec=SPEC))
    started(stack, address)
    queued = stack.ingress.send_message(address, Message("next", id="m-q", while_busy="queue"))
    assert stack.ingress.attach(queued).reply == "You said: next"
    events = stack.events(address)
    assert turns(events) == [(1, "succeeded"), (2, "succeeded")]
    kinds = [(e.turn, type(e.body).__name__) for e in events]
    assert kinds.index((1, "MessageQueued")) < kinds.index((1, "TurnEnded")), (
        "the running turn recorded the message queued behind it"
    )
    assert [b.text for b in of(stack, address, TurnStarted)][1] == "next"


def test_interrupt_stops_the_running_turn_within_seconds_and_runs_its_own(
    stack: LiveStack, address: str
) -> None:
    slow = script({"sleep": 60, "reply": "never"})
    stack.ingress.send_message(address, Message(slow, spec=SPEC))
    started(stack, address)
    began = time.monotonic()
    sent = stack.ingress.send_message(address, Message("do this now", while_busy="interrupt"))
    first = stack.wait_for_turn_end(address, 1, timeout=10)
    assert first.outcome == "stopped"
    assert time.monotonic() - began < 10
    assert stack.ingress.attach(sent).reply == "You said: do this now"
    assert turns(stack.events(address)) == [(1, "stopped"), (2, "succeeded")]


def test_steer_shows_the_model_the_message_in_the_next_round_and_the_turn_ends_once(
    stack: LiveStack, address: str
) -> None:
    text = script({"sleep": ROUND, "calls": [CALCULATE]}, {"reply": "never read"})
    first = stack.ingress.send_message(address, Message(text, spec=SPEC))
    started(stack, address)
    steer = Message("also say hello", id="m-steer", while_busy="steer")
    copy = stack.ingress.send_message(address, steer)

    ended = stack.ingress.attach(first)
    assert ended.reply == "You said: also say hello", "round 2 read the steered message"
    assert stack.ingress.attach(copy).status.turn == 1, "the copy started no turn"
    events = stack.events(address)
    assert turns(events) == [(1, "succeeded")]
    steered = [(e.turn, e.round, e.body) for e in events if isinstance(e.body, MessageSteered)]
    assert steered == [(1, 1, MessageSteered("also say hello", "m-steer"))]
    rounds = [e.round for e in events if isinstance(e.body, ModelMessage)]
    assert rounds == [1, 2]


def test_a_pause_holds_a_running_turn_after_its_round_and_resume_goes_on(
    stack: LiveStack, address: str
) -> None:
    text = script({"sleep": ROUND, "calls": [CALCULATE]}, {"reply": "done: {results}"})
    stack.ingress.send_message(address, Message(text, spec=SPEC))
    started(stack, address)
    stack.ingress.send(PAUSE, Pause(by="ops"), address)

    eventually(lambda: of(stack, address, AgentPaused) or None, 30, "the pause to hold")
    assert stack.ingress.status(address).state == "paused"
    assert [f.content for f in of(stack, address, ToolFinished)] == ["42"], "round 1 finished"
    assert len(of(stack, address, ModelMessage)) == 1, "round 2 did not start"

    resumed = stack.ingress.wake(address, Resume(by="ops"))
    assert resumed.reply == "done: 42"
    assert turns(stack.events(address)) == [(1, "succeeded")]


def spawn(task: str) -> dict[str, Any]:
    return {"name": "spawn_agent", "arguments": {"task": task}}


def test_a_paused_agent_keeps_a_message_a_schedule_fire_and_a_child_report_through_a_sigkill(
    stack: LiveStack, address: str
) -> None:
    parent_spec = msgspec.structs.replace(SPEC, can_spawn=True)
    child = script({"sleep": 1, "reply": "child is done"})
    parent = script(
        {"calls": [spawn(child)]}, {"calls": [{"name": "wait"}]}, {"reply": "got: {results}"}
    )
    assert stack.ingress.message(address, parent, parent_spec).status.state == "waiting"
    stack.ingress.send(PAUSE, Pause(by="ops"), address)
    eventually(lambda: of(stack, address, AgentPaused) or None, 30, "the pause")
    stack.ingress.send_message(address, Message("after the pause", id="m-late"))
    eventually(lambda: of(stack, address, MessageQueued) or None, 30, "the message, queued")
    soon = datetime.now(UTC) + timedelta(seconds=1)  # noqa: TID251 - the test's clock
    stack.ingress.call(ADD_SCHEDULE, ScheduleSpec("from the schedule", At(soon)), address)
    eventually(lambda: of(stack, address, ScheduleFired) or None, 30, "the schedule's fire")
    eventually(lambda: len(of(stack, address, MessageQueued)) == 2 or None, 30, "it queued")
    eventually(lambda: of(stack, address, ChildReported) or None, 30, "the child's report")

    stack.restart_endpoint(kill=True)
    status = stack.ingress.status(address)
    assert (status.state, status.turn, status.queued) == ("paused", 1, 2)
    assert turns(stack.events(address)) == [], "nothing ran while paused"

    stack.ingress.send_wake(address, Resume(by="ops"))
    second = stack.wait_for_turn_end(address, 2)
    assert second.reply == "You said: after the pause"
    third = stack.wait_for_turn_end(address, 3)
    assert third.reply == "You said: from the schedule"
    events = stack.events(address)
    assert turns(events) == [(1, "succeeded"), (2, "succeeded"), (3, "succeeded")]
    endings = [e.body for e in events if isinstance(e.body, TurnEnded)]
    assert "child is done" in endings[0].reply
    kinds = [type(e.body).__name__ for e in events]
    assert kinds.index("AgentResumed") < kinds.index("TurnEnded")
    assert [type(b) for b in of(stack, address, AgentResumed)] == [AgentResumed]
