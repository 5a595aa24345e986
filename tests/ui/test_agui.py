"""The AG-UI route against the official JS client (`@ag-ui/client`'s HttpAgent, run with
node) on a real stack: every event it received is a valid AG-UI event, and the text it
assembled is the reply the agent recorded."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

from schemas.events import (
    ApprovalAnswered,
    ModelMessage,
    PageCallClaimed,
    ToolFinished,
    TurnEnded,
)
from services.executor.scripted import script
from tests.ui.conftest import UiStack

pytestmark = pytest.mark.durable
ROOT = Path(__file__).resolve().parents[2]
EVENTS: TypeAdapter[Any] = TypeAdapter(AguiEvent)
CALCULATE = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}"},
)


def run_node(stack: UiStack, thread: str, kind: str, **extra: Any) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "node is needed (it comes with npm)"
    given = {"url": f"{stack.url}/v1/agui", "key": stack.keys["write"], "thread": thread,
             "kind": kind, "text": CALCULATE, **extra}  # fmt: skip
    done = subprocess.run(
        [node, str(Path(__file__).with_name("run_agent.mjs")), json.dumps(given)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def check(events: list[dict[str, Any]]) -> list[str]:
    for event in events:
        EVENTS.validate_python(event)
    return [e["type"] for e in events]


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_turn_with_a_tool_call_through_the_js_client(ui_stack: UiStack) -> None:
    thread = "acme.agui-tool"
    answer = run_node(ui_stack, thread, "script")
    (run,) = answer["runs"]
    kinds = check(run["events"])
    assert kinds[0] == "RUN_STARTED"
    assert kinds[-1] == "RUN_FINISHED"
    assert (
        kinds.index("TOOL_CALL_START")
        < kinds.index("TOOL_CALL_RESULT")
        < kinds.index("TEXT_MESSAGE_END")
    )
    with ui_stack.client() as api:
        events = list(api.events(thread))
    reply = [e.body for e in events if isinstance(e.body, ModelMessage)][-1].text
    assert reply == "It is 42"
    assert text_of(run["events"]) == reply
    assert run["result"] == reply
    result = next(e for e in run["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "42"
    assistant = [m for m in answer["messages"] if m["role"] == "assistant" and m.get("content")]
    assert assistant[-1]["content"] == reply


def test_an_approval_is_an_interrupt_the_js_client_resumes(ui_stack: UiStack) -> None:
    thread = "acme.agui-approval"
    answer = run_node(ui_stack, thread, "calc", approve=True)
    first, second = answer["runs"]
    assert check(first["events"])[-1] == "RUN_FINISHED"
    outcome = first["events"][-1]["outcome"]
    assert outcome["type"] == "interrupt"
    assert first["interrupts"][0]["reason"] == "tool_approval"
    kinds = check(second["events"])
    assert kinds[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in kinds
    assert text_of(second["events"]) == "It is 42"
    with ui_stack.client() as api:
        events = list(api.events(thread))
    answered = [e.body for e in events if isinstance(e.body, ApprovalAnswered)]
    assert [(a.approve, a.note) for a in answered] == [(True, "from the AG-UI client")]
    assert [e.body.content for e in events if isinstance(e.body, ToolFinished)] == ["42"]
    assert [e.body.outcome for e in events if isinstance(e.body, TurnEnded)] == ["succeeded"]


def test_a_frontend_tool_runs_in_the_client_and_the_turn_goes_on_with_its_result(
    ui_stack: UiStack,
) -> None:
    thread = "acme.agui-frontend"
    title = {"name": "read_title", "description": "The page's title.",
             "parameters": {"type": "object", "properties": {}}}  # fmt: skip
    call = {"calls": [{"name": "read_title", "arguments": {}}]}
    text = script(call, {"reply": "Title: {results}"})
    answer = run_node(ui_stack, thread, "pager", text=text, tools=[title], toolAnswer="My page")
    first, second = answer["runs"]
    kinds = check(first["events"])
    assert kinds[-1] == "RUN_FINISHED"
    assert first["events"][-1].get("outcome") is None, "not an interrupt: the client runs it"
    started = [e for e in first["events"] if e["type"] == "TOOL_CALL_START"]
    assert [e["toolCallName"] for e in started] == ["read_title"]
    assert check(second["events"])[-1] == "RUN_FINISHED"
    assert second["result"] == "Title: My page"
    assert text_of(second["events"]) == "Title: My page"
    with ui_stack.client() as api:
        events = list(api.events(thread))
    claimed = [e.body for e in events if isinstance(e.body, PageCallClaimed)]
    assert [c.page.split("@")[0] for c in claimed] == ["agui"]
    assert [e.body.content for e in events if isinstance(e.body, ToolFinished)] == ["My page"]
    assert [e.body.outcome for e in events if isinstance(e.body, TurnEnded)] == ["succeeded"]
