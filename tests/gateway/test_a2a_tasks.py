"""The pure translation of a timeline into A2A tasks and stream events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from a2a.types import TaskState

from schemas.events import (
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    EventBody,
    MessageQueued,
    ModelMessage,
    Outcome,
    TurnEnded,
    TurnStarted,
)
from schemas.live import LiveDelta, Retraction
from services.gateway.a2a_tasks import TurnStream, task, view_of

AGENT = "acme.helper"
MESSAGE = "m1"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _event(seq: int, body: EventBody, turn: int = 2, round_: int = 1) -> Event:
    return Event(AGENT, seq, turn, round_, T0 + timedelta(seconds=seq), body)


STARTED = _event(5, TurnStarted("hello", "helper", 1, message_id=MESSAGE))


def _state_and_text(events: list[Event]) -> tuple[TaskState, str]:
    view = view_of(AGENT, MESSAGE, events)
    assert view is not None
    found = task(view, events, events, history=True)
    return found.status.state, "".join(p.text for p in found.status.message.parts)


@pytest.mark.parametrize(
    ("outcome", "state", "says"),
    [
        ("succeeded", TaskState.TASK_STATE_COMPLETED, "the reply"),
        ("failed", TaskState.TASK_STATE_FAILED, "why it failed"),
        ("stopped", TaskState.TASK_STATE_CANCELED, "why it stopped"),
        ("superseded", TaskState.TASK_STATE_CANCELED, "why it was superseded"),
    ],
    ids=["succeeded", "failed", "stopped", "superseded"],
)
def test_a_turns_end_is_the_tasks_final_state(
    outcome: Outcome, state: TaskState, says: str
) -> None:
    ended = TurnEnded(outcome, reply="the reply" if outcome == "succeeded" else "", reason=says)
    events = [STARTED, _event(6, ended)]
    assert _state_and_text(events) == (state, says)


def test_a_queued_message_is_submitted_and_a_waiting_turn_needs_input() -> None:
    queued = _event(3, MessageQueued("hello", message_id=MESSAGE), turn=1)
    state, says = _state_and_text([queued])
    assert state == TaskState.TASK_STATE_SUBMITTED
    assert "waits behind the turn in progress" in says
    asked = _event(6, ApprovalRequested("r1", "c1", "calculator"))
    state, says = _state_and_text([queued, STARTED, asked])
    assert state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert f"POST /v1/agents/{AGENT}/approvals/r1" in says
    answered = _event(7, ApprovalAnswered("r1", approve=True))
    assert _state_and_text([queued, STARTED, asked, answered])[0] == TaskState.TASK_STATE_WORKING


def test_the_task_has_its_message_and_each_rounds_text() -> None:
    events = [
        STARTED,
        _event(6, ModelMessage("m", "")),
        _event(7, ModelMessage("m", "It is 42"), round_=2),
        _event(8, TurnEnded("succeeded", reply="It is 42"), round_=2),
    ]
    view = view_of(AGENT, MESSAGE, events)
    assert view is not None
    found = task(view, events[:1], events, history=True)
    assert (found.id, found.context_id) == (f"{AGENT}/{MESSAGE}", AGENT)
    assert [m.parts[0].text for m in found.history] == ["hello"]
    assert [(a.artifact_id, a.parts[0].text) for a in found.artifacts] == [("round-2", "It is 42")]
    assert not task(view, events[:1], events, history=False).history


def _chunks(stream: TurnStream, *items: Event | LiveDelta | Retraction) -> list[tuple[str, bool]]:
    sent = [shown for item in items for shown in stream.take(item)]
    return [
        (shown.artifact.parts[0].text, shown.append) for shown in sent if hasattr(shown, "artifact")
    ]


def test_live_text_is_appended_and_the_recorded_text_completes_it() -> None:
    stream = TurnStream(AGENT, MESSAGE, [])
    chunks = _chunks(
        stream,
        STARTED,
        LiveDelta(AGENT, 2, 1, "a", 0, "It "),
        LiveDelta(AGENT, 2, 1, "a", 3, "is"),
        _event(6, ModelMessage("m", "It is 42")),
    )
    assert chunks == [("It ", False), ("is", True), (" 42", True)]


def test_a_retried_round_starts_its_artifact_again() -> None:
    stream = TurnStream(AGENT, MESSAGE, [])
    chunks = _chunks(
        stream,
        STARTED,
        LiveDelta(AGENT, 2, 1, "a", 0, "It was"),
        Retraction(AGENT, 2, 1),
        LiveDelta(AGENT, 2, 1, "b", 0, "It is"),
        _event(6, ModelMessage("m", "It is 42")),
        _event(7, ModelMessage("other", "Not what was shown"), round_=2),
    )
    assert chunks == [
        ("It was", False),
        ("It is", False),
        (" 42", True),
        ("Not what was shown", False),
    ]


def test_the_stream_says_each_change_of_state_once() -> None:
    stream = TurnStream(AGENT, MESSAGE, [])
    assert stream.first().status.state == TaskState.TASK_STATE_SUBMITTED
    items = [STARTED, _event(6, ModelMessage("m", "hi")), _event(7, TurnEnded("succeeded", "hi"))]
    states = [
        shown.status.state
        for item in items
        for shown in stream.take(item)
        if hasattr(shown, "status")
    ]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]
    assert stream.done()
