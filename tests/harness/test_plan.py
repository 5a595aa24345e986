"""The plan-then-execute harness and the harness registry, driven in process."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from schemas.chat import ChatMessage
from schemas.context import ContextState
from schemas.harness import Ack, CallModel, CallTool, Fail, Reply, TurnState
from schemas.model import ModelRequest
from schemas.spec import AgentSpec, Limits
from services.executor.scripted import follow_directives, script
from services.harness.inprocess import run_in_process
from services.harness.loop import TurnInput
from services.harness.plan import EXECUTING, PLANNING, plan_then_execute
from services.harness.registry import BUILTIN_HARNESSES, start
from services.tools.builtin import CALCULATOR

SPEC = AgentSpec(
    kind="planner",
    instructions="Be brief.",
    model="script",
    tools={"calculator": "allow", "secret": "deny"},
    harness="plan",
)
SECRET = msgspec.structs.replace(CALCULATOR.definition, name="secret")
TOOLS = (CALCULATOR.definition, SECRET)
PLANNED = script(
    {"reply": "1. Multiply with the calculator.\n2. Answer."},
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}."},
)


def given(text: str, spec: AgentSpec = SPEC) -> TurnInput:
    turn = TurnState(number=1, spec=spec, messages=(ChatMessage(role="user", content=text),))
    return TurnInput("acme.planner", turn, (), TOOLS, ContextState())


def requests(commands: Sequence[object]) -> list[ModelRequest]:
    return [c.request for c in commands if isinstance(c, CallModel)]


def test_one_model_call_writes_the_plan_then_the_loop_carries_it_out() -> None:
    recording = run_in_process(given(PLANNED), follow_directives, harness=plan_then_execute)
    plan, *rounds = requests(recording.commands)
    assert plan.tools == ()
    assert PLANNING in plan.messages[0].content
    assert "Tools you may use: calculator." in plan.messages[0].content
    assert [r.round for r in (plan, *rounds)] == [1, 2, 3]
    assert all(EXECUTING in r.messages[0].content for r in rounds)
    assert [m.content for m in rounds[0].messages if m.role == "assistant"] == [
        "1. Multiply with the calculator.\n2. Answer."
    ]
    assert isinstance(recording.commands[-1], Reply)
    assert recording.commands[-1].text == "It is calculator ran with {'expression': '6*7'}."
    assert [c.call.name for c in recording.commands if isinstance(c, CallTool)] == ["calculator"]


def test_a_denied_tool_is_never_offered_nor_named_in_the_plan() -> None:
    recording = run_in_process(given(PLANNED), follow_directives, harness=plan_then_execute)
    for request in requests(recording.commands):
        assert "secret" not in {tool.name for tool in request.tools}
        assert "secret" not in request.messages[0].content


def test_the_plan_counts_as_the_turns_first_round() -> None:
    spec = msgspec.structs.replace(SPEC, limits=Limits(max_rounds=1))
    recording = run_in_process(given(PLANNED, spec), follow_directives, harness=plan_then_execute)
    assert len(requests(recording.commands)) == 1
    assert isinstance(recording.commands[-1], Fail)
    assert "all 1 rounds" in recording.commands[-1].reason


def test_the_registry_starts_the_harness_the_spec_names() -> None:
    assert set(BUILTIN_HARNESSES) == {"composition", "loop", "plan"}
    plain = msgspec.structs.replace(SPEC, harness="loop")
    first = next(start(BUILTIN_HARNESSES, given(PLANNED, plain)))
    assert isinstance(first, CallModel)
    assert first.request.tools, "the loop offers its tools from the first call"
    planned = next(start(BUILTIN_HARNESSES, given(PLANNED)))
    assert isinstance(planned, CallModel)
    assert planned.request.tools == ()


def test_a_harness_the_deployment_lacks_fails_the_turn_with_a_sentence() -> None:
    spec = msgspec.structs.replace(SPEC, harness="gone")
    turn = start(BUILTIN_HARNESSES, given("hi", spec))
    failed = next(turn)
    assert failed == Fail("This deployment has no harness 'gone' to run the turn; it offers: "
                          "composition, loop, plan.")  # fmt: skip
    with pytest.raises(StopIteration) as stopped:
        turn.send(Ack())
    assert stopped.value.value == given("hi", spec).turn


FINGERPRINT = "8d6b8126ef5b67a97144c95cec952a7c88dff0394e2804357438966fa83a8d97"
"""The loop's first prompt fingerprint for that spec, as it was before specs named
their harness."""


def test_a_spec_without_the_field_runs_the_loop_with_the_same_prompt() -> None:
    raw = {
        "kind": "k",
        "instructions": "Be brief.",
        "model": "script",
        "tools": {"calculator": "allow"},
    }
    spec = msgspec.convert(raw, type=AgentSpec)
    assert spec.harness == "loop"
    turn = TurnState(number=1, spec=spec, messages=(ChatMessage(role="user", content="x"),))
    plain = TurnInput("acme.planner", turn, (), (CALCULATOR.definition,), ContextState())
    first = next(start(BUILTIN_HARNESSES, plain))
    assert isinstance(first, CallModel)
    assert first.fingerprint == FINGERPRINT
