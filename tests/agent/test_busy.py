"""What a message does when it finds a turn in progress (`while_busy`), and pause and
resume, as the machine decides them: pure, without Restate."""

from __future__ import annotations

import msgspec
import pytest

from schemas.chat import ChatMessage
from schemas.events import (
    AgentPaused,
    AgentResumed,
    ChildReported,
    MessageQueued,
    MessageRejected,
    MessageSteered,
    TurnEnded,
    TurnStarted,
)
from schemas.spec import WhileBusy
from schemas.state import AgentRecord
from schemas.wake import Approval, ChildReport, Message, Pause, Resume, Stop, Timer
from services.agent.arrivals import (
    ALREADY_PAUSED,
    QUEUE_FULL,
    QUEUE_LIMIT,
    REJECTED,
    REJECTED_PAUSED,
)
from services.agent.machine import (
    INTERRUPTED,
    NOT_PAUSED,
    Drive,
    RefuseWake,
    TurnRan,
    react,
    state_of,
)
from tests.agent.test_machine import (
    AWAITING_APPROVAL,
    AWAITING_CHILDREN,
    CHILD,
    IDLE,
    PHASES,
    REQUEST,
    SPEC,
    WITH_CHILD,
    bodies,
    kinds,
    last,
    turn,
)

ME = "acme.bot"
WAITING = PHASES["awaiting children"]


def message(policy: WhileBusy | None, text: str = "and this") -> Message:
    return Message(text, id=f"m-{policy}", while_busy=policy)


# --- while_busy ------------------------------------------------------------------------


def test_queue_is_the_default_behind_a_turn_that_waits_for_its_children() -> None:
    for policy in (None, "queue"):
        reaction = react(ME, WAITING, message(policy))
        assert bodies(reaction) == [MessageQueued("and this", f"m-{policy}")]
        assert reaction.record.queue == (message(policy),)


def test_interrupt_stops_the_turn_in_progress_and_starts_its_own() -> None:
    reaction = react(ME, WAITING, message("interrupt"))
    ended, started = bodies(reaction)[-2:]
    assert ended == TurnEnded("stopped", reason=INTERRUPTED, usage=turn().usage)
    assert started == TurnStarted("and this", "helper", 0, message_id="m-interrupt")
    assert isinstance(last(reaction), Drive)
    assert reaction.record.turns == 2


def test_steer_joins_a_waiting_turn_whose_next_round_shows_it() -> None:
    reaction = react(ME, WAITING, message("steer"))
    assert bodies(reaction) == [MessageSteered("and this", "m-steer")]
    assert reaction.record.turn is not None
    assert reaction.record.turn.arrived == (ChatMessage(role="user", content="and this"),)
    assert reaction.record.turns == 1
    assert reaction.record.queue == ()


@pytest.mark.parametrize("phase", ["awaiting children", "awaiting approval", "parked"])
def test_reject_is_recorded_and_refused_with_409_in_any_phase(phase: str) -> None:
    reaction = react(ME, PHASES[phase], message("reject"))
    assert bodies(reaction) == [MessageRejected("and this", "m-reject", REJECTED)]
    assert last(reaction) == RefuseWake(409, REJECTED)
    assert reaction.record == PHASES[phase]


def test_reject_to_an_idle_agent_starts_a_turn() -> None:
    assert isinstance(last(react(ME, IDLE, message("reject"))), Drive)


def test_the_spec_sets_the_default_and_the_message_overrides_it() -> None:
    steering = msgspec.structs.replace(SPEC, while_busy="steer")
    record = msgspec.structs.replace(
        WAITING, turn=turn(AWAITING_CHILDREN, pending=WITH_CHILD, spec=steering)
    )
    assert kinds(react(ME, record, message(None))) == ["Emit"]
    assert react(ME, record, message(None)).record.turn.arrived  # type: ignore[union-attr]
    assert react(ME, record, message("queue")).record.queue == (message("queue"),)


def test_the_copy_of_a_message_that_joined_a_running_turn_does_nothing() -> None:
    ran = TurnRan(turn(), ("succeeded", "done"), steered=("m-steer",))
    record = react(ME, msgspec.structs.replace(IDLE, turn=turn()), ran).record
    assert record.steered == ("m-steer",)
    copy = react(ME, record, message("steer"))
    assert copy.effects == ()
    assert copy.record == record


def test_an_approval_wait_is_superseded_by_a_queued_message_but_joined_by_a_steer() -> None:
    record = PHASES["awaiting approval"]
    assert bodies(react(ME, record, message("queue")))[1].outcome == "superseded"  # type: ignore[attr-defined]
    steered = react(ME, record, message("steer")).record.turn
    assert steered is not None
    assert steered.phase == AWAITING_APPROVAL


# --- pause and resume -------------------------------------------------------------------

PAUSED = msgspec.structs.replace(IDLE, paused=True)


def test_pause_holds_an_idle_agent_and_says_so() -> None:
    reaction = react(ME, IDLE, Pause(by="ops"))
    assert reaction.record.paused
    assert bodies(reaction) == [AgentPaused("ops")]
    assert state_of(None, paused=True) == "paused"
    assert react(ME, PAUSED, Pause()).note == ALREADY_PAUSED


def test_a_paused_agent_queues_messages_and_rejects_what_asks_to_be() -> None:
    queued = react(ME, PAUSED, Message("first", id="a"))
    assert bodies(queued) == [MessageQueued("first", "a")]
    assert not [e for e in queued.effects if isinstance(e, Drive)]
    for policy in ("interrupt", "steer"):
        assert react(ME, PAUSED, message(policy)).record.queue == (message(policy),)
    assert last(react(ME, PAUSED, message("reject"))) == RefuseWake(409, REJECTED_PAUSED)


def test_a_paused_agent_records_a_child_report_but_does_not_go_on() -> None:
    record = msgspec.structs.replace(WAITING, paused=True)
    report = ChildReport(CHILD, 1, "call_0", "succeeded", "done")
    reaction = react(ME, record, report)
    assert kinds(reaction) == ["Emit"]
    assert isinstance(bodies(reaction)[0], ChildReported)
    assert reaction.record.turn is not None
    assert reaction.record.turn.pending == ()


def test_a_paused_agent_records_an_answer_but_does_not_run_the_call() -> None:
    record = msgspec.structs.replace(PHASES["awaiting approval"], paused=True)
    reaction = react(ME, record, Approval(REQUEST, approve=True))
    assert kinds(reaction) == ["Emit"]
    resumed = react(ME, reaction.record, Resume())
    assert isinstance(last(resumed), Drive)


def test_resume_goes_on_with_the_held_turn_then_runs_the_queue_in_order() -> None:
    record = react(ME, PAUSED, Message("first", id="a")).record
    record = react(ME, record, Message("second", id="b")).record
    resumed = react(ME, record, Resume(by="ops"))
    started = TurnStarted("first", "helper", 0, None, "a")
    assert bodies(resumed)[:2] == [AgentResumed("ops"), started]
    assert resumed.record.queue == (Message("second", id="b"),)
    assert not resumed.record.paused


def test_resume_drives_a_turn_held_at_a_round_boundary() -> None:
    held = TurnRan(turn(), None, held=Pause(by="ops"))
    record = react(ME, msgspec.structs.replace(IDLE, turn=turn()), held).record
    assert record.paused
    assert state_of(record.turn, paused=record.paused) == "paused"
    resumed = react(ME, record, Resume())
    assert isinstance(last(resumed), Drive)


def test_a_turn_that_ended_in_the_round_a_pause_came_in_ends_and_the_agent_holds() -> None:
    record = msgspec.structs.replace(IDLE, turn=turn(), queue=(Message("next"),))
    ran = TurnRan(turn(), ("succeeded", "done"), held=Pause())
    reaction = react(ME, record, ran)
    assert [type(b).__name__ for b in bodies(reaction)] == ["TurnEnded", "AgentPaused"]
    assert reaction.record.paused
    assert reaction.record.queue == (Message("next"),)


def test_nothing_starts_while_paused_and_a_stop_still_ends_the_held_turn() -> None:
    assert react(ME, PAUSED, Timer("dequeue")).effects == ()
    record = msgspec.structs.replace(WAITING, paused=True, queue=(Message("next"),))
    stopped = react(ME, record, Stop())
    assert bodies(stopped)[-1].outcome == "stopped"  # type: ignore[attr-defined]
    assert not [e for e in stopped.effects if isinstance(e, Drive)]


def test_resume_of_an_agent_that_is_not_paused_changes_nothing() -> None:
    reaction = react(ME, IDLE, Resume())
    assert reaction.note == NOT_PAUSED
    assert reaction.record == AgentRecord(turns=1, spec=SPEC, last_outcome="succeeded")


# --- the queue's ceiling ----------------------------------------------------------------


@pytest.mark.parametrize("record", [PAUSED, WAITING], ids=["paused", "waiting"])
def test_a_full_queue_refuses_the_next_message_and_records_why(record: AgentRecord) -> None:
    for n in range(3):
        record = react(ME, record, Message(f"m{n}", id=f"q{n}"), queue_limit=3).record
    assert len(record.queue) == 3
    refused = react(ME, record, Message("one more", id="q3"), queue_limit=3)
    sentence = QUEUE_FULL.format(limit=3)
    assert "TEASPILL_AGENT_QUEUE" in sentence
    assert bodies(refused) == [MessageRejected("one more", "q3", sentence)]
    assert last(refused) == RefuseWake(429, sentence)
    assert refused.record == record


def test_the_queue_takes_a_message_again_once_one_started() -> None:
    record = PAUSED
    for n in range(2):
        record = react(ME, record, Message(f"m{n}", id=f"q{n}"), queue_limit=2).record
    resumed = react(ME, record, Resume(), queue_limit=2).record
    assert len(resumed.queue) == 1
    paused = react(ME, resumed, Pause(), queue_limit=2).record
    taken = react(ME, paused, Message("again", id="q2"), queue_limit=2)
    assert bodies(taken) == [MessageQueued("again", "q2")]
    assert taken.record.queue[-1] == Message("again", id="q2")


def test_the_default_ceiling_is_a_hundred_messages() -> None:
    record = msgspec.structs.replace(PAUSED, queue=tuple(Message(f"m{n}") for n in range(99)))
    assert len(react(ME, record, Message("last")).record.queue) == QUEUE_LIMIT == 100
    full = react(ME, record, Message("last")).record
    assert isinstance(last(react(ME, full, Message("past"))), RefuseWake)
