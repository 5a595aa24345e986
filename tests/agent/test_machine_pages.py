"""The wake's decisions for a call that runs in the page: the first page's claim holds it,
only that page's result answers it, once, and capped; the claiming page's stream closing
first answers it with an unknown outcome; a person's approval does not answer it; a new
message supersedes it as it does an approval. Pure, without Restate."""

from __future__ import annotations

from schemas.chat import ChatMessage, ToolCall
from schemas.events import ApprovalAbandoned, ApprovalAnswered, ApprovalRefused, PageCallClaimed
from schemas.harness import AwaitingApproval, PendingApproval, TurnState
from schemas.pages import UNKNOWN_PAGE_OUTCOME
from schemas.spec import AgentSpec
from schemas.state import AgentRecord
from schemas.wake import Approval, Message, PageCall
from services.agent.machine import Drive, RefuseWake, react
from tests.agent.test_machine import bodies

ME = "acme.bot"
SPEC = AgentSpec(kind="helper", instructions="", model="script", tools={"page:*": "allow"})
REQUEST = "t1r1-call_0"
ASKED = AwaitingApproval(PendingApproval(REQUEST, ToolCall("call_0", "read_title"), page=True))
RECORD = AgentRecord(
    turns=1,
    spec=SPEC,
    turn=TurnState(1, SPEC, (ChatMessage(role="user", content="hi"),), round=1, phase=ASKED),
)


def pending(record: AgentRecord) -> PendingApproval:
    assert record.turn is not None
    phase = record.turn.phase
    assert isinstance(phase, AwaitingApproval)
    return phase.approval


def claimed(page: str = "tab-1") -> AgentRecord:
    reaction = react(ME, RECORD, PageCall("claimed", page, REQUEST))
    assert bodies(reaction) == [PageCallClaimed(REQUEST, page)]
    assert not any(isinstance(e, Drive) for e in reaction.effects)
    return reaction.record


def test_the_first_claim_holds_the_request_and_another_page_is_refused() -> None:
    record = claimed()
    assert pending(record).claimed == "tab-1"
    again = react(ME, record, PageCall("claimed", "tab-1", REQUEST))
    assert again.effects == ()
    other = react(ME, record, PageCall("claimed", "tab-2", REQUEST))
    (refused,) = bodies(other)
    assert isinstance(refused, ApprovalRefused)
    assert refused.reason == "other_page"
    assert "claimed by another page" in refused.message
    assert pending(other.record).claimed == "tab-1"


def test_the_claiming_pages_result_answers_the_request_and_the_turn_goes_on() -> None:
    done = react(ME, claimed(), PageCall("result", "tab-1", REQUEST, "My page"))
    assert bodies(done) == [ApprovalAnswered(REQUEST, True, "", "page tab-1")]
    drive = done.effects[-1]
    assert isinstance(drive, Drive)
    answered = pending(done.record)
    assert (answered.answer, answered.result, answered.status) == (True, "My page", "ok")
    twice = react(ME, done.record, PageCall("result", "tab-1", REQUEST, "My page"))
    assert not any(isinstance(e, Drive) for e in twice.effects)


def test_a_result_from_a_page_that_did_not_claim_the_request_changes_nothing() -> None:
    for record in (RECORD, claimed("tab-2")):
        reaction = react(ME, record, PageCall("result", "tab-1", REQUEST, "mine"))
        (refused,) = bodies(reaction)
        assert isinstance(refused, ApprovalRefused)
        assert refused.reason == "other_page"
        assert pending(reaction.record).answer is None


def test_a_result_past_its_cap_is_dropped_when_it_arrives() -> None:
    big = PageCall("result", "tab-1", REQUEST, "x" * 20_001, kind="other")
    answered = pending(react(ME, claimed(), big).record)
    assert answered.status == "error"
    assert answered.result.startswith("The page's result was 20,001 characters")


def test_the_claiming_page_closing_first_leaves_the_outcome_unknown() -> None:
    gone = react(ME, claimed(), PageCall("closed", "tab-1"))
    assert isinstance(gone.effects[-1], Drive)
    lost = pending(gone.record)
    assert (lost.status, lost.result) == ("unknown", UNKNOWN_PAGE_OUTCOME)
    late = react(ME, gone.record, PageCall("result", "tab-1", REQUEST, "My page"))
    assert not any(isinstance(e, Drive) for e in late.effects)


def test_another_page_closing_or_a_page_closing_before_a_claim_changes_nothing() -> None:
    assert react(ME, claimed(), PageCall("closed", "tab-2")).effects == ()
    assert react(ME, RECORD, PageCall("closed", "tab-1")).effects == ()


def test_a_persons_approval_does_not_answer_a_call_that_runs_in_the_page() -> None:
    reaction = react(ME, claimed(), Approval(REQUEST, True, by="ops"))
    assert isinstance(reaction.effects[-1], RefuseWake)
    assert reaction.effects[-1].status == 409
    assert pending(reaction.record).answer is None


def test_a_new_message_supersedes_a_call_waiting_for_a_page() -> None:
    reaction = react(ME, claimed(), Message("never mind"))
    assert ApprovalAbandoned(REQUEST) in bodies(reaction)
    late = react(ME, reaction.record, PageCall("result", "tab-1", REQUEST, "My page"))
    (refused,) = bodies(late)
    assert isinstance(refused, ApprovalRefused)
    assert refused.reason == "turn_ended"
