"""A page's part in a call that runs in the page, as the machine decides it: a claim, a
result, a page's stream that closed. Pure, like the machine (`machine.py`).

A request the turn waits on is claimed by the first page whose claim arrives; only that
page's result answers it, once. When that page's stream closes before its result came,
the call's outcome is unknown: the model is told so and the call is never handed to
another page.
"""

from __future__ import annotations

import msgspec

from schemas.events import ApprovalAnswered, ApprovalRefused, EventBody, PageCallClaimed
from schemas.harness import AwaitingApproval, PendingApproval, ToolStatus, TurnState
from schemas.pages import UNKNOWN_PAGE_OUTCOME, page_result
from schemas.state import AgentRecord
from schemas.wake import PageCall
from services.agent.approvals import RefusalReason, remember, waiting_request, with_answered
from services.agent.reaction import Drive, Emit, Reaction

CLOSED_NOTE = "The page closed before it sent a result."


def on_page_call(record: AgentRecord, call: PageCall) -> Reaction:
    if call.step == "closed":
        return _closed(record, call.page)
    turn = record.turn
    phase = turn.phase if turn is not None else None
    asked = waiting_request(phase, call.request_id)
    if turn is None or not isinstance(phase, AwaitingApproval) or asked is None or not asked.page:
        return _refused(record, call, *_gone(record, call.request_id))
    if call.step == "claimed":
        return _claimed(record, turn, phase, asked, call.page)
    if asked.claimed != call.page:
        return _refused(record, call, "other_page", _not_theirs(asked, call.page))
    content, dropped = page_result(call.content, call.kind)
    status: ToolStatus = "error" if dropped else call.status
    done = msgspec.structs.replace(asked, answer=True, result=content, status=status)
    return _answered(record, turn, phase, (done,), note="", page=call.page)


def _claimed(
    record: AgentRecord,
    turn: TurnState,
    phase: AwaitingApproval,
    asked: PendingApproval,
    page: str,
) -> Reaction:
    if asked.claimed == page:
        return Reaction(record)  # the same claim again
    if asked.claimed:
        call = PageCall("claimed", page, asked.request_id)
        return _refused(record, call, "other_page", _not_theirs(asked, page))
    claimed = msgspec.structs.replace(asked, claimed=page)
    updated = msgspec.structs.replace(turn, phase=with_answered(phase, claimed))
    event = PageCallClaimed(asked.request_id, page)
    return Reaction(
        msgspec.structs.replace(record, turn=updated),
        (Emit(turn.number, turn.round, (event,)),),
    )


def _closed(record: AgentRecord, page: str) -> Reaction:
    """Every request `page` claimed and did not answer gets an unknown outcome; a page
    that held none closed without news."""
    turn = record.turn
    phase = turn.phase if turn is not None else None
    if turn is None or not isinstance(phase, AwaitingApproval):
        return Reaction(record)
    held = tuple(r for r in phase.waiting() if r.page and r.claimed == page)
    if not held:
        return Reaction(record)
    lost = tuple(
        msgspec.structs.replace(r, answer=False, result=UNKNOWN_PAGE_OUTCOME, status="unknown")
        for r in held
    )
    return _answered(record, turn, phase, lost, note=CLOSED_NOTE, page=page)


def _answered(
    record: AgentRecord,
    turn: TurnState,
    phase: AwaitingApproval,
    done: tuple[PendingApproval, ...],
    *,
    note: str,
    page: str,
) -> Reaction:
    """The requests answered: the turn goes on where it paused once none waits."""
    answered = record.answered
    events: list[EventBody] = []
    for request in done:
        phase = with_answered(phase, request)
        answered = remember(answered, request.request_id)
        approve = bool(request.answer)
        events.append(ApprovalAnswered(request.request_id, approve, note, by=f"page {page}"))
    resumed = msgspec.structs.replace(turn, phase=phase)
    updated = msgspec.structs.replace(record, turn=resumed, answered=answered)
    emitted = Emit(turn.number, turn.round, tuple(events))
    if record.paused or phase.waiting():
        return Reaction(updated, (emitted,))
    return Reaction(updated, (emitted, Drive(resumed)))


def _gone(record: AgentRecord, request: str) -> tuple[RefusalReason, str]:
    if request in record.abandoned:
        return "turn_ended", f"Request {request!r} was not answered before its turn ended."
    if request in record.answered:
        return "already_answered", f"Request {request!r} has its result already; it ran once."
    return "unknown_request", f"There is no pending page request {request!r} for this agent."


def _not_theirs(asked: PendingApproval, page: str) -> str:
    if asked.claimed:
        return f"Request {asked.request_id!r} was claimed by another page; it runs there once."
    return (
        f"Request {asked.request_id!r} was not claimed by page {page!r}: a page claims a "
        "request before it runs it."
    )


def _refused(record: AgentRecord, call: PageCall, reason: RefusalReason, sentence: str) -> Reaction:
    """A claim or result that changes nothing is recorded (its page did not wait)."""
    refused = ApprovalRefused(call.request_id, reason, False, f"page {call.page}", sentence)
    turn = record.turn
    number, round_ = (turn.number, turn.round) if turn is not None else (record.turns, 0)
    return Reaction(record, (Emit(number, round_, (refused,)),))
