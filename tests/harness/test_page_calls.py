"""Calls that run in the page, in the harness: the page's tools the spec grants are shown
(a page tool named like a tool of the deployment is not), a call to one waits for a page as
an approval waits for a person, and the page's result is the call's result. Pure: the
harness in process."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage, ToolCall, ToolDefinition
from schemas.harness import (
    AskApproval,
    AwaitingApproval,
    Between,
    CallModel,
    Reply,
    Told,
    TurnState,
)
from schemas.spec import AgentSpec
from services.executor.scripted import follow_directives, script
from services.harness.inprocess import Recording, run_in_process
from services.harness.loop import TurnInput

TITLE = ToolDefinition("read_title", "The page's title.")
WIPE = ToolDefinition("wipe", "Clears the page.")
CALC = ToolDefinition("calculator", "Not the deployment's.")
DEPLOYED = (ToolDefinition("calculator", "Arithmetic."),)
SPEC = AgentSpec(kind="t", instructions="", model="script", tools={"page:read_title": "allow"})


def start(spec: AgentSpec = SPEC, name: str = "read_title") -> TurnInput:
    text = script({"calls": [{"name": name, "arguments": {}}]}, {"reply": "{results}"})
    turn = TurnState(
        1, spec, (ChatMessage(role="user", content=text),), page_tools=(TITLE, WIPE, CALC)
    )
    return TurnInput("acme.bot", turn, (), DEPLOYED)


def kinds(recording: Recording) -> list[str]:
    return [type(c).__name__ for c in recording.commands if not isinstance(c, Between)]


def test_the_model_is_shown_the_page_tools_its_spec_grants() -> None:
    every = AgentSpec(
        kind="t", instructions="", model="script", tools={"page:*": "allow", "page:wipe": "deny"}
    )
    for spec, shown in [(SPEC, {"read_title"}), (every, {"read_title"})]:
        first = run_in_process(start(spec), follow_directives).commands[0]
        assert isinstance(first, CallModel)
        assert {t.name for t in first.request.tools} == shown


def test_a_call_waits_for_a_page_and_the_pages_result_is_its_result() -> None:
    first = run_in_process(start(), follow_directives)
    assert kinds(first) == ["CallModel", "AskApproval"]
    asking = first.commands[-1]
    assert asking == AskApproval("t1r1-call_0", ToolCall("call_0", "read_title", {}), page=True)
    assert first.final is not None
    phase = first.final.phase
    assert isinstance(phase, AwaitingApproval)
    done = msgspec.structs.replace(phase.approval, answer=True, result="My page")
    turn = msgspec.structs.replace(first.final, phase=msgspec.structs.replace(phase, approval=done))
    then = run_in_process(TurnInput("acme.bot", turn, (), DEPLOYED), follow_directives)
    assert then.commands[0] == Told(asking.call, "My page", "ok", shown=True)
    assert then.commands[-1] == Reply("My page")


def test_a_page_tool_the_spec_does_not_grant_is_refused_like_any_other() -> None:
    recording = run_in_process(start(name="wipe"), follow_directives)
    assert kinds(recording) == ["CallModel", "Refuse", "CallModel", "Reply"]
