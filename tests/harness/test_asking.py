"""The built-in `ask_user`: its arguments as a question, the turn waiting on it as on an
approval, and the answer as the call's result. Pure: the harness in process."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from schemas.chat import ChatMessage, ToolCall
from schemas.harness import (
    AskApproval,
    AwaitingApproval,
    Between,
    CallModel,
    PendingApproval,
    Refuse,
    Reply,
    Told,
    TurnState,
)
from schemas.questions import MAX_ASKED, InputAsked, Question, answer_problem
from schemas.spec import AgentSpec
from services.executor.scripted import follow_directives, script
from services.harness.asking import DECLINED, QUESTION, answer_text, asked_of
from services.harness.inprocess import Recording, run_in_process
from services.harness.loop import TurnInput

SPEC = AgentSpec(kind="t", instructions="Ask.", model="script", tools={"ask_user": "allow"})
FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}, "name": {"type": "string"}},
    "required": ["confirm"],
}


def ask(**arguments: Any) -> dict[str, Any]:
    return {"name": "ask_user", "arguments": arguments}


def start(*calls: dict[str, Any], spec: AgentSpec = SPEC) -> TurnInput:
    text = script({"calls": list(calls)}, {"reply": "{results}"})
    turn = TurnState(1, spec, (ChatMessage(role="user", content=text),))
    return TurnInput("acme.bot", turn, (), ())


def kinds(recording: Recording) -> list[str]:
    return [type(c).__name__ for c in recording.commands if not isinstance(c, Between)]


def answered(first: Recording, *answers: tuple[bool, dict[str, Any], str]) -> Recording:
    """The turn driven again once each request it waits on got its answer, in order."""
    assert first.final is not None
    phase = first.final.phase
    assert isinstance(phase, AwaitingApproval)
    done = [
        msgspec.structs.replace(r, answer=ok, answers=values, note=note)
        for r, (ok, values, note) in zip(phase.requests(), answers, strict=True)
    ]
    again = msgspec.structs.replace(phase, approval=done[0], others=tuple(done[1:]))
    turn = msgspec.structs.replace(first.final, phase=again)
    return run_in_process(TurnInput("acme.bot", turn, (), ()), follow_directives)


def test_a_question_with_choices_is_a_form_of_one_field_taking_one_of_them() -> None:
    asked = asked_of(ToolCall("c", "ask_user", {"question": "Which?", "choices": ["a", "b"]}))
    assert isinstance(asked, InputAsked)
    question = asked.questions[QUESTION]
    assert question.message == "Which?"
    assert answer_problem(asked.questions, {QUESTION: {"answer": "a"}}) == ""
    assert "one of 'a', 'b'" in answer_problem(asked.questions, {QUESTION: {"answer": "c"}})


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "needs a non-empty string `question`"),
        ({"question": "  "}, "needs a non-empty string `question`"),
        ({"question": "q", "choices": []}, "`choices` as a list of 1 to 20 strings"),
        ({"question": "q", "choices": ["a"], "form": FORM}, "`choices` or a `form`, not both"),
        ({"question": "q", "form": {"properties": {"x": {"type": "array"}}}}, "'x' is not one"),
        (
            {"question": "q", "form": {"properties": {"x": {"type": "string"}}, "required": ["y"]}},
            "`required` names only its fields",
        ),
    ],
)
def test_arguments_that_make_no_question_are_refused_with_a_sentence(
    arguments: dict[str, Any], problem: str
) -> None:
    found = asked_of(ToolCall("c", "ask_user", arguments))
    assert isinstance(found, str)
    assert problem in found


def test_ask_user_is_shown_only_when_granted() -> None:
    plain = AgentSpec(kind="t", instructions="", model="script")
    for spec, shown in [(SPEC, True), (plain, False)]:
        recording = run_in_process(start(ask(question="q"), spec=spec), follow_directives)
        first = recording.commands[0]
        assert isinstance(first, CallModel)
        assert ("ask_user" in {t.name for t in first.request.tools}) is shown


def test_the_turn_waits_on_the_question_and_the_answer_is_the_result() -> None:
    first = run_in_process(
        start(ask(question="Colour?", choices=["red", "blue"])), follow_directives
    )
    assert kinds(first) == ["CallModel", "AskApproval"]
    asking = first.commands[-1]
    assert isinstance(asking, AskApproval)
    assert asking.request_id == "t1r1-call_0"
    assert asking.asked is not None
    assert asking.asked.questions[QUESTION].schema["properties"]["answer"]["enum"] == [
        "red",
        "blue",
    ]
    then = answered(first, (True, {QUESTION: {"answer": "blue"}}, ""))
    assert kinds(then) == ["Told", "CallModel", "Reply"]
    assert then.commands[0] == Told(asking.call, "blue")
    assert then.commands[-1] == Reply("blue")


def test_a_form_is_answered_as_its_values_and_a_decline_says_so() -> None:
    first = run_in_process(start(ask(question="Sure?", form=FORM)), follow_directives)
    form = answered(first, (True, {QUESTION: {"confirm": True}}, "be quick"))
    assert form.commands[-1] == Reply('{"confirm":true}\n\nTheir note: be quick')
    declined = answered(first, (False, {}, ""))
    assert declined.commands[-1] == Reply(DECLINED)


def test_questions_that_follow_one_another_are_asked_at_once_and_all_answered() -> None:
    calls = (ask(question="One?"), ask(question="Two?", form=FORM), ask(question=""))
    first = run_in_process(start(*calls), follow_directives)
    assert kinds(first) == ["CallModel", "AskApproval", "AskApproval"]
    assert first.final is not None
    phase = first.final.phase
    assert isinstance(phase, AwaitingApproval)
    assert [r.request_id for r in phase.requests()] == ["t1r1-call_0", "t1r1-call_1"]
    assert [c.id for c in phase.remaining] == ["call_2"]
    then = answered(
        first, (True, {QUESTION: {"answer": "1"}}, ""), (True, {QUESTION: {"confirm": False}}, "")
    )
    assert kinds(then) == ["Told", "Told", "Refuse", "CallModel", "Reply"]
    refused = then.commands[2]
    assert isinstance(refused, Refuse)
    assert "non-empty string `question`" in refused.reason
    reply = then.commands[-1]
    assert isinstance(reply, Reply)
    assert reply.text.splitlines()[:2] == ["1", '{"confirm":false}']


def test_the_answer_text_of_a_question_without_a_form_is_the_answer_itself() -> None:
    asked = InputAsked({QUESTION: Question("q", {"properties": {"answer": {"type": "string"}}})})
    call = ToolCall("c", "ask_user", {"question": "q"})
    pending = PendingApproval("r", call, True, asked=asked, answers={QUESTION: {"answer": "yes"}})
    assert answer_text(pending) == "yes"


@pytest.mark.parametrize(
    "form",
    [
        {"properties": {"x": {"type": ["string", "null"]}}},
        {"properties": {"x": {"type": {"const": "string"}}}},
        {"properties": {"x": {"type": "string"}}, "required": [["x"]]},
        {"properties": {"x": {"type": "string"}}, "required": [{"x": 1}]},
        {"properties": {"x": {"type": "string"}}, "required": "x"},
    ],
)
def test_a_form_of_unhashable_shapes_is_refused_with_a_sentence_not_raised(
    form: dict[str, Any],
) -> None:
    """JSON Schema allows `type` as a list; a model may write one. The turn must go on."""
    found = asked_of(ToolCall("c", "ask_user", {"question": "q", "form": form}))
    assert isinstance(found, str)
    assert "ask_user takes `form`" in found
    recording = run_in_process(start(ask(question="q", form=form)), follow_directives)
    refused = [c for c in recording.commands if isinstance(c, Refuse)]
    assert refused
    assert "ask_user takes `form`" in refused[0].reason
    assert isinstance(recording.commands[-1], Reply)


@pytest.mark.parametrize(
    "arguments",
    [
        {"question": "Which?", "choices": ["a" * 70_000]},
        {"question": "q", "form": {"properties": {"x": {"enum": list(range(20_000))}}}},
        {"question": "q", "form": {"properties": {"x": {"type": "string", "about": "b" * 70_000}}}},
    ],
)
def test_a_question_too_big_to_keep_is_refused_as_an_mcp_servers_is(
    arguments: dict[str, Any],
) -> None:
    """The question is journaled and held in the agent's state while the turn waits, so it
    is held to the size a waiting MCP call may keep."""
    found = asked_of(ToolCall("c", "ask_user", arguments))
    assert isinstance(found, str)
    assert f"at most {MAX_ASKED:,} bytes" in found
