"""A person's answer to an approval request, as the machine decides it: run (or refuse)
the call the turn waits on, or refuse an answer that changes nothing. Pure, like the
machine (`machine.py`)."""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.events import ApprovalAnswered, ApprovalRefused
from schemas.harness import AwaitingApproval, PendingApproval
from schemas.questions import answer_problem
from schemas.state import KEEP_ANSWERED, AgentRecord
from schemas.wake import Approval
from services.agent.reaction import Drive, Emit, Reaction, RefuseWake

RefusalReason = Literal["already_answered", "unknown_request", "turn_ended", "other_page"]


def on_approval(record: AgentRecord, answer: Approval) -> Reaction:
    """Run or refuse the call a person answered: the turn goes on where it paused, once
    every request it waits on there is answered."""
    turn = record.turn
    phase = turn.phase if turn is not None else None
    asked = waiting_request(phase, answer.request_id)
    if turn is None or not isinstance(phase, AwaitingApproval) or asked is None:
        return refuse_answer(record, answer)
    if asked.page:
        return _page_call(record, answer)
    questions = asked.asked.questions if asked.asked is not None else None
    problem = answer_problem(questions, answer.answers) if questions and answer.approve else ""
    if problem:
        return _wrong(record, answer, problem)
    answers = answer.answers if answer.approve else {}
    answered = msgspec.structs.replace(
        asked, answer=answer.approve, note=answer.note, answers=answers
    )
    resumed = msgspec.structs.replace(turn, phase=with_answered(phase, answered))
    event = ApprovalAnswered(answer.request_id, answer.approve, answer.note, answer.by, answers)
    updated = msgspec.structs.replace(
        record, turn=resumed, answered=remember(record.answered, answer.request_id)
    )
    emitted = Emit(turn.number, turn.round, (event,))
    if record.paused or with_answered(phase, answered).waiting():
        return Reaction(updated, (emitted,))
    return Reaction(updated, (emitted, Drive(resumed)))


def waiting_request(phase: object, request_id: str) -> PendingApproval | None:
    """The unanswered request `request_id` the phase waits on, if it is one."""
    if not isinstance(phase, AwaitingApproval):
        return None
    return next((r for r in phase.waiting() if r.request_id == request_id), None)


def with_answered(phase: AwaitingApproval, answered: PendingApproval) -> AwaitingApproval:
    """The phase with `answered` in place of the request it answers."""
    if phase.approval.request_id == answered.request_id:
        return msgspec.structs.replace(phase, approval=answered)
    others = tuple(answered if r.request_id == answered.request_id else r for r in phase.others)
    return msgspec.structs.replace(phase, others=others)


def refuse_answer(record: AgentRecord, answer: Approval) -> Reaction:
    """An answer that changes nothing is recorded (its sender may not wait for the wake)
    and refused to a sender that waits."""
    request = answer.request_id
    reason: RefusalReason
    if request in record.abandoned:
        reason, status = "turn_ended", 409
        sentence = f"Approval request {request!r} was not answered before its turn ended"
    elif request in record.answered:
        reason, status = "already_answered", 409
        sentence = f"Approval request {request!r} was already answered"
    else:
        reason, status = "unknown_request", 404
        sentence = f"There is no pending approval request {request!r} for this agent"
    sentence += "; nothing was changed." if status == 409 else "."
    refused = ApprovalRefused(request, reason, answer.approve, answer.by, sentence)
    turn = record.turn
    number, round_ = (turn.number, turn.round) if turn is not None else (record.turns, 0)
    return Reaction(record, (Emit(number, round_, (refused,)), RefuseWake(status, sentence)))


def _wrong(record: AgentRecord, answer: Approval, problem: str) -> Reaction:
    """Answers that do not fit the questions change nothing: the request still waits."""
    sentence = f"{problem} Approval request {answer.request_id!r} still waits for an answer."
    refused = ApprovalRefused(
        answer.request_id, "wrong_answer", answer.approve, answer.by, sentence
    )
    turn = record.turn
    assert turn is not None
    return Reaction(record, (Emit(turn.number, turn.round, (refused,)), RefuseWake(422, sentence)))


def _page_call(record: AgentRecord, answer: Approval) -> Reaction:
    """A call that runs in the page is answered by the page that runs it, not approved."""
    request = answer.request_id
    sentence = (
        f"Request {request!r} runs in the page: a page claims it and posts its result "
        "(POST /v1/agents/{address}/page-calls/{request_id}/claim, then .../result)."
    )
    refused = ApprovalRefused(request, "other_page", answer.approve, answer.by, sentence)
    turn = record.turn
    assert turn is not None
    return Reaction(record, (Emit(turn.number, turn.round, (refused,)), RefuseWake(409, sentence)))


def remember(answered: tuple[str, ...], request_id: str) -> tuple[str, ...]:
    return (*answered, request_id)[-KEEP_ANSWERED:]
