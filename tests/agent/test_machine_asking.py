"""The wake's decisions for questions asked at once (`ask_user` calls that follow one
another): each is answered on its own, the turn goes on once all are; a new message
supersedes them all; the park timer parks them. Pure, without Restate."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage, ToolCall
from schemas.events import ApprovalAbandoned, ApprovalAnswered, ApprovalRefused, TurnParked
from schemas.harness import AwaitingApproval, PendingApproval, TurnState
from schemas.questions import InputAsked, Question
from schemas.spec import AgentSpec
from schemas.state import AgentRecord
from schemas.wake import Approval, Message, Timer
from services.agent.machine import Drive, FindSpec, RefuseWake, react, state_of
from tests.agent.test_machine import bodies

ME = "acme.bot"
SPEC = AgentSpec(kind="helper", instructions="", model="script", tools={"ask_user": "allow"})
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ASKED = InputAsked({"question": Question("Name?", FORM)})


def pending(call_id: str) -> PendingApproval:
    call = ToolCall(call_id, "ask_user", {"question": "Name?"})
    return PendingApproval(f"t1r1-{call_id}", call, asked=ASKED)


TWO = AwaitingApproval(pending("call_0"), others=(pending("call_1"),))
RECORD = AgentRecord(
    turns=1,
    spec=SPEC,
    turn=TurnState(1, SPEC, (ChatMessage(role="user", content="hi"),), round=1, phase=TWO),
)


def answer(request: str, name: str = "Ada") -> Approval:
    return Approval(request, True, by="ops", answers={"question": {"name": name}})


def test_one_answer_of_two_is_recorded_and_the_turn_keeps_waiting_on_the_other() -> None:
    first = react(ME, RECORD, answer("t1r1-call_1"))
    assert bodies(first) == [
        ApprovalAnswered("t1r1-call_1", True, "", "ops", {"question": {"name": "Ada"}})
    ]
    assert not any(isinstance(e, Drive) for e in first.effects)
    assert first.record.turn is not None
    phase = first.record.turn.phase
    assert isinstance(phase, AwaitingApproval)
    assert [r.request_id for r in phase.waiting()] == ["t1r1-call_0"]
    assert state_of(first.record.turn) == "waiting"
    second = react(ME, first.record, answer("t1r1-call_0", "Bo"))
    drive = second.effects[-1]
    assert isinstance(drive, Drive)
    assert isinstance(drive.turn.phase, AwaitingApproval)
    assert not drive.turn.phase.waiting()


def test_an_answer_to_a_question_answered_already_is_refused() -> None:
    first = react(ME, RECORD, answer("t1r1-call_1"))
    again = react(ME, first.record, answer("t1r1-call_1", "Cy"))
    [refused] = bodies(again)
    assert isinstance(refused, ApprovalRefused)
    assert refused.reason == "already_answered"
    assert again.effects[-1] == RefuseWake(409, refused.message)


def test_an_answer_that_does_not_fit_the_form_changes_nothing() -> None:
    wrong = react(ME, RECORD, Approval("t1r1-call_0", True, answers={"question": {}}))
    [refused] = bodies(wrong)
    assert isinstance(refused, ApprovalRefused)
    assert refused.reason == "wrong_answer"
    assert "is missing 'name'" in refused.message
    assert wrong.record == RECORD


def test_a_new_message_supersedes_every_question_still_waiting() -> None:
    first = react(ME, RECORD, answer("t1r1-call_1"))
    superseded = react(ME, first.record, Message("never mind", kind="helper"))
    abandoned = [b for b in bodies(superseded) if isinstance(b, ApprovalAbandoned)]
    assert abandoned == [ApprovalAbandoned("t1r1-call_0")]
    assert isinstance(superseded.effects[-1], FindSpec)


def test_the_park_timer_parks_the_questions_under_the_first_still_waiting() -> None:
    first = react(ME, RECORD, answer("t1r1-call_0"))
    parked = react(ME, first.record, Timer("park", turn=1))
    assert bodies(parked) == [TurnParked("t1r1-call_1")]
    assert parked.record.turn is not None
    assert state_of(parked.record.turn) == "parked"
    assert msgspec.structs.replace(parked.record, turn=first.record.turn) == first.record
