"""The wake as a pure state machine: every wake kind in every phase, without Restate."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest

from schemas.chat import ChatMessage, ToolCall
from schemas.context import Segment
from schemas.events import (
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRefused,
    ChildReported,
    MessageQueued,
    StopRefused,
    TurnEnded,
    TurnParked,
    TurnStarted,
)
from schemas.harness import (
    AwaitingApproval,
    AwaitingChildren,
    PendingApproval,
    PendingChild,
    Phase,
    Running,
    TurnState,
)
from schemas.model import Usage
from schemas.questions import InputAsked, Question
from schemas.spec import AgentSpec
from schemas.state import KEEP_ANSWERED, AgentRecord, Ledger
from schemas.wake import Approval, ChildReport, Message, ParentRef, Stop, Timer
from services.agent.machine import (
    NOTHING_TO_STOP,
    STOPPED,
    SUPERSEDED,
    Drive,
    Effect,
    Emit,
    FindSpec,
    Reaction,
    RefuseWake,
    Remember,
    SendWake,
    SpecFound,
    TurnRan,
    TurnStopped,
    react,
    state_of,
)

ME = "acme.bot"
SPEC = AgentSpec(kind="helper", instructions="Be brief.", model="script")
PUBLISHED = msgspec.structs.replace(SPEC, version=3)
CALL = ToolCall("call_0", "ledger", {"entry": "a"})
REQUEST = "t1r1-call_0"
CHILD = "acme.bot.t1r1c0"


RUNNING = Running()


def turn(phase: Phase = RUNNING, **changes: object) -> TurnState:
    user = ChatMessage(role="user", content="do it")
    base = TurnState(1, SPEC, (user,), round=1, phase=phase, usage=Usage(10, 5, 0))
    return msgspec.structs.replace(base, **changes)


AWAITING_APPROVAL = AwaitingApproval(PendingApproval(REQUEST, CALL))
PARKED = AwaitingApproval(PendingApproval(REQUEST, CALL), parked=True)
AWAITING_CHILDREN = AwaitingChildren()
WITH_CHILD = (PendingChild(CHILD, "call_0"),)

IDLE = AgentRecord(turns=1, spec=SPEC, last_outcome="succeeded")
PHASES: dict[str, AgentRecord] = {
    "idle": IDLE,
    "awaiting children": msgspec.structs.replace(
        IDLE, turn=turn(AWAITING_CHILDREN, pending=WITH_CHILD)
    ),
    "awaiting approval": msgspec.structs.replace(IDLE, turn=turn(AWAITING_APPROVAL)),
    "parked": msgspec.structs.replace(IDLE, turn=turn(PARKED)),
}


def bodies(reaction: Reaction) -> list[object]:
    """What the reaction records; a drive that starts its turn records its start once the
    driver found it funded."""
    return [
        body
        for e in reaction.effects
        for body in (
            e.bodies
            if isinstance(e, Emit)
            else (e.start.started,)
            if isinstance(e, Drive) and e.start
            else ()
        )
    ]


def kinds(reaction: Reaction) -> list[str]:
    return [type(effect).__name__ for effect in reaction.effects]


def last(reaction: Reaction) -> Effect:
    return reaction.effects[-1]


# --- status ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "state"),
    [("idle", "idle"), ("awaiting children", "waiting"), ("awaiting approval", "waiting"),
     ("parked", "parked")],
)  # fmt: skip
def test_status_is_derived_from_the_phase(phase: str, state: str) -> None:
    assert state_of(PHASES[phase].turn) == state


def test_a_running_turn_is_running() -> None:
    assert state_of(turn()) == "running"


# --- messages --------------------------------------------------------------------------


def test_a_message_to_an_idle_agent_starts_a_turn_with_the_stored_spec() -> None:
    reaction = react(ME, IDLE, Message("hello"))
    assert kinds(reaction) == ["Drive"]
    assert bodies(reaction) == [TurnStarted("hello", "helper", 0)]
    drive = last(reaction)
    assert isinstance(drive, Drive)
    assert drive.turn.number == 2
    assert drive.turn.messages == (ChatMessage(role="user", content="hello"),)
    assert reaction.record.turns == 2
    assert state_of(reaction.record.turn) == "running"


def test_a_message_with_a_spec_runs_with_it_and_keeps_it() -> None:
    other = AgentSpec(kind="other", instructions="x")
    reaction = react(ME, IDLE, Message("hi", spec=other))
    assert reaction.record.spec == other
    drive = last(reaction)
    assert isinstance(drive, Drive)
    assert drive.turn.spec == other


def test_a_published_kind_is_looked_up_before_the_turn_starts() -> None:
    published = msgspec.structs.replace(IDLE, spec=PUBLISHED)
    reaction = react(ME, published, Message("hi"))
    assert reaction.effects == (FindSpec(Message("hi"), "helper", direct=True),)
    assert reaction.record == published
    newer = msgspec.structs.replace(PUBLISHED, version=4, instructions="v4")
    found = react(ME, published, SpecFound(Message("hi"), newer, direct=True))
    assert found.record.spec == newer
    drive = last(found)
    assert isinstance(drive, Drive)
    assert drive.turn.spec.version == 4


def test_no_spec_for_a_waiting_sender_is_a_404_and_changes_nothing() -> None:
    empty = AgentRecord()
    reaction = react(ME, empty, Message("hi"))
    assert reaction.effects == (
        RefuseWake(
            404, f"Agent {ME} has no spec yet: its first message must carry a spec or a kind."
        ),
    )
    assert reaction.record == empty
    missing = react(ME, empty, SpecFound(Message("hi", kind="ghost"), None, direct=True))
    assert missing.effects == (
        RefuseWake(404, "No spec of kind 'ghost' is published for tenant 'acme'."),
    )


def test_a_queued_message_without_a_spec_is_a_failed_turn_and_the_next_one_starts() -> None:
    queued = AgentRecord(turns=1, queue=(Message("second", spec=SPEC),))
    found = react(ME, queued, SpecFound(Message("first", kind="ghost"), None, direct=False))
    ended = [b for b in bodies(found) if isinstance(b, TurnEnded)]
    assert [e.outcome for e in ended] == ["failed"]
    assert "No spec of kind 'ghost'" in ended[0].reason
    assert ended[0].failed_by == "step"
    drive = last(found)
    assert isinstance(drive, Drive)
    assert drive.turn.number == 3
    assert found.record.queue == ()


@pytest.mark.parametrize("phase", ["awaiting children"])
def test_a_message_queues_behind_a_turn_that_waits_for_children(phase: str) -> None:
    record = PHASES[phase]
    reaction = react(ME, record, Message("later"))
    assert bodies(reaction) == [MessageQueued("later")]
    assert reaction.record.queue == (Message("later"),)
    assert reaction.record.turn == record.turn


@pytest.mark.parametrize("phase", ["awaiting approval", "parked"])
def test_a_message_supersedes_a_turn_that_waits_for_an_answer(phase: str) -> None:
    reaction = react(ME, PHASES[phase], Message("new"))
    assert bodies(reaction) == [
        ApprovalAbandoned(REQUEST),
        TurnEnded("superseded", reason=SUPERSEDED, usage=Usage(10, 5, 0)),
        TurnStarted("new", "helper", 0),
    ]
    assert REQUEST in reaction.record.answered
    assert reaction.record.last_outcome == "superseded"
    assert isinstance(last(reaction), Drive)
    assert reaction.record.turns == 2


# --- a turn that ran ---------------------------------------------------------------------


def running() -> AgentRecord:
    return msgspec.structs.replace(IDLE, turn=turn())


def test_a_turn_that_replied_ends_succeeded_and_is_remembered() -> None:
    ran = turn(
        messages=(ChatMessage(role="user", content="q"), ChatMessage(role="assistant", content="a"))
    )
    reaction = react(ME, running(), TurnRan(ran, ("succeeded", "a")))
    assert bodies(reaction) == [TurnEnded("succeeded", reply="a", usage=Usage(10, 5, 0))]
    number = ran.number
    assert Remember(0, Segment(number, ran.messages)) in reaction.effects
    assert reaction.record.context.segments == 1  # the next segment goes to history.1
    assert reaction.record.turn is None
    assert reaction.record.last_outcome == "succeeded"
    assert reaction.reply == "a"


def test_a_failed_turn_says_why_and_the_next_queued_message_starts() -> None:
    record = msgspec.structs.replace(running(), queue=(Message("next"),))
    reaction = react(ME, record, TurnRan(turn(), ("failed", "The model step failed: boom")))
    ended = [b for b in bodies(reaction) if isinstance(b, TurnEnded)]
    assert ended[0].outcome == "failed"
    assert ended[0].reason == "The model step failed: boom"
    assert reaction.reply == ""
    drive = last(reaction)
    assert isinstance(drive, Drive)
    assert drive.turn.messages[0].content == "next"


def test_a_childs_turn_reports_to_its_parent_with_an_idempotency_key() -> None:
    parent = ParentRef("acme.boss", 4, "call_2")
    record = msgspec.structs.replace(IDLE, turn=turn(parent=parent))
    reaction = react(ME, record, TurnRan(turn(parent=parent), ("succeeded", "done")))
    sends = [e for e in reaction.effects if isinstance(e, SendWake)]
    assert sends == [
        SendWake(
            "acme.boss",
            ChildReport(ME, 4, "call_2", "succeeded", "done", usage=turn(parent=parent).usage),
            key=f"finished {ME} 1",
        )
    ]


def test_a_turn_paused_for_approval_sets_the_park_timer() -> None:
    paused = turn(AWAITING_APPROVAL)
    reaction = react(ME, running(), TurnRan(paused, None))
    assert reaction.record.turn == paused
    assert reaction.effects == (
        SendWake(ME, Timer("park", turn=1), delay=timedelta(seconds=SPEC.limits.approval_timeout)),
    )
    assert state_of(reaction.record.turn) == "waiting"


def test_a_turn_paused_for_children_just_waits() -> None:
    paused = turn(AWAITING_CHILDREN, pending=WITH_CHILD)
    reaction = react(ME, running(), TurnRan(paused, None))
    assert reaction.effects == ()
    assert reaction.record.turn == paused


def test_the_ledger_a_turn_charged_is_kept() -> None:
    ledger = Ledger(day="2026-11-30", day_tokens=15)
    reaction = react(ME, running(), TurnRan(turn(), ("succeeded", "ok"), ledger))
    assert reaction.record.ledger == ledger


@pytest.mark.parametrize(("queued", "dequeue"), [((), False), ((Message("next"),), True)])
def test_a_stopped_running_turn_ends_stopped_and_leaves_the_queue_to_a_new_wake(
    queued: tuple[Message, ...], dequeue: bool
) -> None:
    record = msgspec.structs.replace(running(), queue=queued)
    reaction = react(ME, record, TurnStopped(turn(round=2)))
    ended = [b for b in bodies(reaction) if isinstance(b, TurnEnded)]
    assert ended == [TurnEnded("stopped", reason=STOPPED, usage=Usage(10, 5, 0))]
    assert not any(isinstance(e, Drive) for e in reaction.effects)
    assert (SendWake(ME, Timer("dequeue")) in reaction.effects) is dequeue
    assert reaction.record.queue == queued


# --- children --------------------------------------------------------------------------


def report(child: str = CHILD, number: int = 1) -> ChildReport:
    return ChildReport(child, number, "call_0", "succeeded", "child says hi")


def test_the_last_childs_report_resumes_a_turn_awaiting_children() -> None:
    reaction = react(ME, PHASES["awaiting children"], report())
    assert bodies(reaction) == [ChildReported("call_0", CHILD, "succeeded", "child says hi")]
    drive = last(reaction)
    assert isinstance(drive, Drive)
    assert drive.turn.pending == ()
    assert "child says hi" in drive.turn.messages[-1].content


def test_a_report_while_other_children_are_pending_only_records_it() -> None:
    two = (*WITH_CHILD, PendingChild("acme.bot.t1r1c1", "call_1"))
    record = msgspec.structs.replace(IDLE, turn=turn(AWAITING_CHILDREN, pending=two))
    reaction = react(ME, record, report())
    assert kinds(reaction) == ["Emit"]
    assert reaction.record.turn is not None
    assert [p.address for p in reaction.record.turn.pending] == ["acme.bot.t1r1c1"]


def test_a_report_for_a_turn_awaiting_approval_waits_for_the_answer() -> None:
    record = msgspec.structs.replace(IDLE, turn=turn(AWAITING_APPROVAL, pending=WITH_CHILD))
    reaction = react(ME, record, report())
    assert kinds(reaction) == ["Emit"]
    assert reaction.record.turn is not None
    assert reaction.record.turn.phase == AWAITING_APPROVAL


@pytest.mark.parametrize("phase", ["idle", "awaiting approval", "parked"])
def test_a_late_report_is_recorded_and_kept_for_the_next_turn(phase: str) -> None:
    reaction = react(ME, PHASES[phase], report(number=1))
    assert kinds(reaction) == ["Emit", "Remember"]
    remembered = reaction.effects[-1]
    assert isinstance(remembered, Remember)
    assert "finished later" in remembered.segment.messages[0].content
    assert remembered.index == PHASES[phase].context.segments
    counted = msgspec.structs.replace(PHASES[phase].context, segments=remembered.index + 1)
    assert reaction.record == msgspec.structs.replace(PHASES[phase], context=counted)


# --- approvals -------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["awaiting approval", "parked"])
@pytest.mark.parametrize("approve", [True, False])
def test_an_answer_resumes_the_turn_where_it_paused(phase: str, approve: bool) -> None:
    answer = Approval(REQUEST, approve, note="n", by="ops")
    reaction = react(ME, PHASES[phase], answer)
    assert bodies(reaction) == [ApprovalAnswered(REQUEST, approve, "n", "ops")]
    drive = last(reaction)
    assert isinstance(drive, Drive)
    assert isinstance(drive.turn.phase, AwaitingApproval)
    assert drive.turn.phase.approval.answer is approve
    assert REQUEST in reaction.record.answered


@pytest.mark.parametrize("phase", ["idle", "awaiting children", "awaiting approval", "parked"])
def test_an_answer_to_an_unknown_request_is_recorded_refused_and_changes_nothing(
    phase: str,
) -> None:
    reaction = react(ME, PHASES[phase], Approval("t9r9-call_9", True, by="ops"))
    sentence = "There is no pending approval request 't9r9-call_9' for this agent."
    assert bodies(reaction) == [
        ApprovalRefused("t9r9-call_9", "unknown_request", True, "ops", sentence)
    ]
    assert last(reaction) == RefuseWake(404, sentence)
    assert reaction.record == PHASES[phase]


def test_a_second_answer_is_a_409_and_the_timeline_says_which_was_applied() -> None:
    first = react(ME, PHASES["awaiting approval"], Approval(REQUEST, True, by="alice"))
    second = react(ME, first.record, Approval(REQUEST, False, by="bob"))
    assert bodies(first) == [ApprovalAnswered(REQUEST, True, "", "alice")]
    [refused] = bodies(second)
    assert isinstance(refused, ApprovalRefused)
    assert (refused.reason, refused.approve, refused.by) == ("already_answered", False, "bob")
    refuse = last(second)
    assert isinstance(refuse, RefuseWake)
    assert refuse.status == 409


def test_an_answer_after_its_turn_ended_unanswered_says_so() -> None:
    superseded = react(ME, PHASES["awaiting approval"], Message("new"))
    late = react(ME, superseded.record, Approval(REQUEST, True))
    [refused] = bodies(late)
    assert isinstance(refused, ApprovalRefused)
    assert refused.reason == "turn_ended"
    assert last(late) == RefuseWake(409, refused.message)


def test_answered_requests_are_bounded() -> None:
    many = tuple(f"r{n}" for n in range(KEEP_ANSWERED))
    record = msgspec.structs.replace(PHASES["awaiting approval"], answered=many)
    reaction = react(ME, record, Approval(REQUEST, True))
    assert len(reaction.record.answered) == KEEP_ANSWERED
    assert reaction.record.answered[-1] == REQUEST


# --- timers and stop -------------------------------------------------------------------


def test_the_park_timer_parks_a_turn_still_waiting_for_its_answer() -> None:
    reaction = react(ME, PHASES["awaiting approval"], Timer("park", turn=1))
    assert bodies(reaction) == [TurnParked(REQUEST)]
    assert state_of(reaction.record.turn) == "parked"


@pytest.mark.parametrize(
    ("phase", "timer"),
    [("parked", Timer("park", 1)), ("awaiting approval", Timer("park", 7)),
     ("idle", Timer("park", 1)), ("awaiting children", Timer("park", 1)),
     ("awaiting approval", Timer("dequeue")), ("awaiting children", Timer("dequeue")),
     ("idle", Timer("dequeue")), ("idle", Timer("unknown"))],
)  # fmt: skip
def test_a_timer_that_no_longer_applies_changes_nothing(phase: str, timer: Timer) -> None:
    reaction = react(ME, PHASES[phase], timer)
    assert reaction.effects == ()
    assert reaction.record == PHASES[phase]


def test_the_dequeue_timer_starts_the_next_message_of_an_idle_agent() -> None:
    record = msgspec.structs.replace(IDLE, queue=(Message("next"),))
    reaction = react(ME, record, Timer("dequeue"))
    assert isinstance(last(reaction), Drive)
    assert reaction.record.queue == ()


@pytest.mark.parametrize("phase", ["awaiting children", "awaiting approval", "parked"])
def test_stop_ends_a_waiting_turn_and_runs_what_queued(phase: str) -> None:
    record = msgspec.structs.replace(PHASES[phase], queue=(Message("next"),))
    reaction = react(ME, record, Stop())
    ended = [b for b in bodies(reaction) if isinstance(b, TurnEnded)]
    assert [e.outcome for e in ended] == ["stopped"]
    abandoned = [b for b in bodies(reaction) if isinstance(b, ApprovalAbandoned)]
    assert len(abandoned) == (phase != "awaiting children")
    assert isinstance(last(reaction), Drive)


def test_stop_without_a_turn_says_there_is_nothing_to_stop_on_the_timeline() -> None:
    reaction = react(ME, IDLE, Stop())
    assert bodies(reaction) == [StopRefused(message=NOTHING_TO_STOP)]
    assert reaction.note == NOTHING_TO_STOP
    assert reaction.record == IDLE


def test_the_same_inputs_give_the_same_reaction() -> None:
    for record in PHASES.values():
        for given in (Message("m"), report(), Approval(REQUEST, True), Stop(), Timer("park", 1)):
            assert react(ME, record, given) == react(ME, record, given)


def test_answers_that_do_not_fit_the_questions_are_refused_and_the_request_still_waits() -> None:
    asked = InputAsked({"quantity": Question("How many?", QUANTITY)})
    waiting = AwaitingApproval(PendingApproval(REQUEST, CALL, asked=asked))
    record = msgspec.structs.replace(IDLE, turn=turn(waiting))
    wrong = react(ME, record, Approval(REQUEST, True, by="ops", answers={"quantity": {"n": "x"}}))
    sentence = (
        "The answer to 'quantity' gives 'n' \"x\", which is not an integer. "
        f"Approval request {REQUEST!r} still waits for an answer."
    )
    assert bodies(wrong) == [ApprovalRefused(REQUEST, "wrong_answer", True, "ops", sentence)]
    assert last(wrong) == RefuseWake(422, sentence)
    assert wrong.record == record
    right = react(ME, record, Approval(REQUEST, True, by="ops", answers={"quantity": {"n": 2}}))
    drive = last(right)
    assert isinstance(drive, Drive)
    assert isinstance(drive.turn.phase, AwaitingApproval)
    assert drive.turn.phase.approval.answers == {"quantity": {"n": 2}}
    assert bodies(right) == [ApprovalAnswered(REQUEST, True, "", "ops", {"quantity": {"n": 2}})]


QUANTITY = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
