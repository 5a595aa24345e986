"""The harness, driven in process with scripted results: no Restate, no model."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from schemas.chat import ChatMessage, ToolDefinition
from schemas.context import ContextState, Segment
from schemas.harness import (
    Ack,
    Arrived,
    AskApproval,
    AwaitingApproval,
    AwaitingChildren,
    Between,
    CallModel,
    CallTool,
    Fail,
    Refuse,
    Reply,
    Result,
    Running,
    Spawn,
    Spawned,
    ToolResult,
    TurnState,
    Wait,
)
from schemas.questions import InputAnswer, InputAsked, Question
from schemas.spec import AgentSpec, Limits
from schemas.wake import ChildReport
from services.executor.scripted import follow_directives, script
from services.harness.children import child_reported
from services.harness.inprocess import Recording, ToolRunner, run_in_process
from services.harness.loop import TurnInput, run_turn
from services.tools.builtin import CALCULATOR

SPEC = AgentSpec(kind="test", instructions="Be brief.", model="script", tools=("calculator",))
TOOLS = (CALCULATOR.definition,)


def start(text: str, spec: AgentSpec = SPEC, history: tuple[ChatMessage, ...] = ()) -> TurnInput:
    turn = TurnState(number=1, spec=spec, messages=(ChatMessage(role="user", content=text),))
    recent = (Segment(0, history),) if history else ()
    return TurnInput("acme.bot", turn, recent, TOOLS, ContextState(segments=len(recent)))


def run(given: TurnInput) -> Recording:
    return run_in_process(given, follow_directives)


def kinds(recording: Recording) -> list[str]:
    """The commands but each round's `Between` (answered `Ack`: nothing arrived)."""
    return [type(c).__name__ for c in recording.commands if not isinstance(c, Between)]


def answer_42(command: CallTool) -> ToolResult:
    return ToolResult(command.call.id, command.call.name, "ok", "42")


def test_a_plain_message_is_one_round_and_a_reply() -> None:
    recording = run(start("hello"))
    assert kinds(recording) == ["CallModel", "Reply"]
    assert recording.commands[-1] == Reply("You said: hello")
    assert recording.final is not None
    assert [m.role for m in recording.final.messages] == ["user", "assistant"]


def test_a_tool_call_then_a_reply_takes_two_rounds() -> None:
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"reply": "It is {results}"},
    )
    recording = run_in_process(start(text), follow_directives, answer_42)
    assert kinds(recording) == ["CallModel", "CallTool", "CallModel", "Reply"]
    tool = recording.commands[1]
    assert isinstance(tool, CallTool)
    assert tool.idempotency_key == "acme.bot/t1/r1/call_0"
    assert recording.commands[-1] == Reply("It is 42")
    assert recording.final is not None
    assert recording.final.round == 2


def test_the_prompt_has_instructions_history_and_sorted_granted_tools() -> None:
    history = (ChatMessage(role="user", content="earlier"),)
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    recording = run(start("now", spec, history))
    request = recording.commands[0]
    assert isinstance(request, CallModel)
    roles = [(m.role, m.content) for m in request.request.messages]
    assert roles == [("system", "Be brief."), ("user", "earlier"), ("user", "now")]
    assert [t.name for t in request.request.tools] == ["calculator", "spawn_agent", "wait"]
    named = request.request
    assert (named.agent, named.turn, named.round, named.call_key) == (
        "acme.bot",
        1,
        1,
        "acme.bot/t1/r1",
    )


def test_an_unknown_tool_is_refused_and_the_model_is_told() -> None:
    text = script({"calls": [{"name": "rm_rf", "arguments": {}}]}, {"reply": "{results}"})
    recording = run(start(text))
    assert kinds(recording) == ["CallModel", "Refuse", "CallModel", "Reply"]
    refusal = recording.commands[1]
    assert isinstance(refusal, Refuse)
    assert "no tool named 'rm_rf'" in refusal.reason
    assert "calculator" in refusal.reason
    final = recording.commands[-1]
    assert isinstance(final, Reply)
    assert "rm_rf" in final.text


def test_spawn_is_refused_when_the_spec_does_not_allow_it() -> None:
    text = script({"calls": [{"name": "spawn_agent", "arguments": {"task": "x"}}]}, {"reply": "ok"})
    assert kinds(run(start(text)))[1] == "Refuse"


def test_a_turn_that_never_replies_fails_at_the_round_limit() -> None:
    loop = {"calls": [{"name": "calculator", "arguments": {"expression": "1"}}]}
    spec = msgspec.structs.replace(SPEC, limits=Limits(max_rounds=3))
    recording = run(start(script(loop, loop, loop, loop), spec))
    assert kinds(recording).count("CallModel") == 3
    final = recording.commands[-1]
    assert isinstance(final, Fail)
    assert "3 rounds" in final.reason


def fan_out_script(children: int) -> str:
    spawn = {"name": "spawn_agent", "arguments": {"task": "child work"}}
    return script(
        {"calls": [spawn] * children}, {"calls": [{"name": "wait"}]}, {"reply": "{results}"}
    )


def test_spawn_returns_child_addresses_at_once_and_wait_ends_the_wake() -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    recording = run(start(fan_out_script(3), spec))
    assert kinds(recording) == ["CallModel", "Spawn", "Spawn", "Spawn", "CallModel", "Wait"]
    children = [c.child for c in recording.commands if isinstance(c, Spawn)]
    assert children == ["acme.bot.t1r1c0", "acme.bot.t1r1c1", "acme.bot.t1r1c2"]
    assert recording.final is not None
    assert recording.final.phase == AwaitingChildren()
    assert [p.address for p in recording.final.pending] == children


def test_the_turn_continues_when_the_last_child_reports() -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    first = run(start(fan_out_script(2), spec))
    assert first.final is not None
    turn = first.final
    for index, child in enumerate(("acme.bot.t1r1c0", "acme.bot.t1r1c1")):
        report = ChildReport(child, 1, f"call_{index}", "succeeded", f"result {index}")
        turn = child_reported(turn, report)
    second = run_in_process(TurnInput("acme.bot", turn, (), TOOLS), follow_directives)
    assert kinds(second) == ["CallModel", "Reply"]
    reply = second.commands[-1]
    assert isinstance(reply, Reply)
    assert "result 0" in reply.text
    assert "result 1" in reply.text


def test_a_waiting_turn_with_pending_children_waits_again() -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    first = run(start(fan_out_script(2), spec))
    assert first.final is not None
    report = ChildReport("acme.bot.t1r1c0", 1, "call_0", "succeeded", "r0")
    turn = child_reported(first.final, report)
    again = run(TurnInput("acme.bot", turn, (), TOOLS))
    assert again.commands == [Wait(("acme.bot.t1r1c1",))]


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (Limits(max_children=1), "limit of 1 helpers"),
        (Limits(max_depth=0), "nested deeper than 0"),
    ],
)
def test_spawn_limits_are_enforced(limits: Limits, message: str) -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True, limits=limits)
    recording = run(start(fan_out_script(2), spec))
    refusals = [c for c in recording.commands if isinstance(c, Refuse)]
    assert refusals
    assert message in refusals[-1].reason


def test_replaying_the_same_results_yields_the_same_commands() -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    given = start(fan_out_script(3), spec)
    assert run(given).commands == run(given).commands


ASKING = AgentSpec(
    kind="guarded",
    instructions="x",
    model="script",
    tools={"calculator": "allow", "ledger": "ask", "shell": "deny"},
)
GUARDED_TOOLS = (
    CALCULATOR.definition,
    ToolDefinition("ledger", "Write to the ledger."),
    ToolDefinition("shell", "Run a command."),
)


def guarded(text: str) -> TurnInput:
    turn = TurnState(number=1, spec=ASKING, messages=(ChatMessage(role="user", content=text),))
    return TurnInput("acme.bot", turn, (), GUARDED_TOOLS)


def test_a_denied_tool_is_never_shown_and_a_call_to_it_is_refused() -> None:
    text = script({"calls": [{"name": "shell", "arguments": {}}]}, {"reply": "{results}"})
    recording = run(guarded(text))
    request = recording.commands[0]
    assert isinstance(request, CallModel)
    assert [t.name for t in request.request.tools] == ["calculator", "ledger"]
    assert "Run a command." not in str(request.request), "the denied tool is not described"
    assert kinds(recording) == ["CallModel", "Refuse", "CallModel", "Reply"]


def ask_then_more() -> str:
    return script(
        {
            "calls": [
                {"name": "ledger", "arguments": {"entry": "a"}},
                {"name": "calculator", "arguments": {"expression": "2+2"}},
            ]
        },
        {"reply": "done: {results}"},
    )


def test_an_ask_tool_ends_the_wake_and_keeps_the_rest_of_the_round() -> None:
    recording = run(guarded(ask_then_more()))
    assert kinds(recording) == ["CallModel", "AskApproval"]
    ask = recording.commands[-1]
    assert isinstance(ask, AskApproval)
    assert ask.request_id == "t1r1-call_0"
    assert ask.call.arguments == {"entry": "a"}
    final = recording.final
    assert final is not None
    assert isinstance(final.phase, AwaitingApproval)
    assert final.phase.approval.answer is None
    assert not final.phase.parked
    assert [c.name for c in final.phase.remaining] == ["calculator"]


def answer(approve: bool) -> Recording:
    first = run(guarded(ask_then_more()))
    assert first.final is not None
    phase = first.final.phase
    assert isinstance(phase, AwaitingApproval)
    approval = msgspec.structs.replace(phase.approval, answer=approve, note="not today")
    answered = msgspec.structs.replace(phase, approval=approval, parked=True)
    turn = msgspec.structs.replace(first.final, phase=answered)
    return run(TurnInput("acme.bot", turn, (), GUARDED_TOOLS))


def test_an_approved_call_runs_then_the_round_goes_on_where_it_paused() -> None:
    recording = answer(approve=True)
    assert kinds(recording) == ["CallTool", "CallTool", "CallModel", "Reply"]
    assert [c.call.name for c in recording.commands[:2] if isinstance(c, CallTool)] == [
        "ledger",
        "calculator",
    ]
    assert recording.final is not None
    assert recording.final.phase == Running()


def test_a_denied_call_is_not_run_and_the_model_is_told() -> None:
    recording = answer(approve=False)
    assert kinds(recording) == ["CallTool", "CallModel", "Reply"]
    call = recording.commands[0]
    assert isinstance(call, CallTool)
    assert call.call.name == "calculator"
    reply = recording.commands[-1]
    assert isinstance(reply, Reply)
    assert "A person denied this call. Their note: not today" in reply.text


def test_a_pending_approval_asks_again_when_woken_without_an_answer() -> None:
    first = run(guarded(ask_then_more()))
    assert first.final is not None
    again = run(TurnInput("acme.bot", first.final, (), GUARDED_TOOLS))
    assert kinds(again) == ["AskApproval"]


def test_a_child_can_only_narrow_its_parents_grants() -> None:
    spec = msgspec.structs.replace(ASKING, can_spawn=True)
    spawn = {
        "name": "spawn_agent",
        "arguments": {"task": "t", "tools": ["ledger", "shell", "rm_rf"]},
    }
    turn = TurnState(1, spec, (ChatMessage(role="user", content=script({"calls": [spawn]})),))
    recording = run(TurnInput("acme.bot", turn, (), GUARDED_TOOLS))
    spawned = [c for c in recording.commands if isinstance(c, Spawn)]
    assert len(spawned) == 1
    assert spawned[0].spec.tools == {"ledger": "ask", "shell": "deny"}


def _answering_between(given: TurnInput, arrived: Arrived) -> list[object]:
    """Drive a turn whose first round's `Between` is answered with `arrived`."""
    harness = run_turn(given)
    seen: list[object] = []
    command = next(harness)
    answered = False
    try:
        while True:
            seen.append(command)
            result: Result
            if isinstance(command, CallModel):
                result = follow_directives(command.request)
            elif isinstance(command, CallTool):
                result = answer_42(command)
            elif isinstance(command, Between) and not answered:
                answered, result = True, arrived
            else:
                result = Ack()
            command = harness.send(result)
    except StopIteration as stop:
        seen.append(stop.value)
    return seen


def test_a_message_that_arrived_during_the_last_round_is_shown_in_one_more_round() -> None:
    joined = ChatMessage(role="user", content="and say hi")
    seen = _answering_between(start("hello"), Arrived((joined,)))
    calls = [c for c in seen if isinstance(c, CallModel)]
    assert len(calls) == 2
    assert calls[1].request.messages[-1] == joined
    assert [c for c in seen if isinstance(c, Reply)] == [Reply("You said: and say hi")]


def test_a_hold_at_a_round_boundary_keeps_the_turn_running_for_later() -> None:
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"reply": "It is {results}"},
    )
    seen = _answering_between(start(text), Arrived(hold=True))
    final = seen[-1]
    assert isinstance(final, TurnState)
    assert isinstance(final.phase, Running)
    assert final.round == 1
    assert not [c for c in seen if isinstance(c, Reply)]


def test_a_notice_follows_the_instructions_and_moves_the_fingerprint() -> None:
    def first_call(given: TurnInput) -> CallModel:
        command = next(run_turn(given))
        assert isinstance(command, CallModel)
        return command

    plain = start("hello")
    told = dataclasses.replace(plain, notices=("The MCP server files is down.",))
    without, with_notice = first_call(plain), first_call(told)
    system = with_notice.request.messages[0]
    assert system.role == "system"
    assert system.content == "Be brief.\n\nThe MCP server files is down."
    assert without.request.messages[0].content == "Be brief."
    assert with_notice.fingerprint != without.fingerprint
    assert first_call(told).fingerprint == with_notice.fingerprint


# --- a call that asks a person for input ---------------------------------------------

ASKED = InputAsked({"quantity": Question("How many?", {"type": "object"})}, state="s1")


def asking(legs: int) -> ToolRunner:
    """A tool that asks for input `legs` times, then answers with what it was told."""

    def tool(command: CallTool) -> ToolResult:
        call = command.call
        leg = command.answer.asked.leg if command.answer is not None else 0
        if leg < legs:
            asked = msgspec.structs.replace(ASKED, leg=leg + 1)
            return ToolResult(call.id, call.name, "ok", "waits", asked=asked)
        answer = command.answer
        assert answer is not None
        return ToolResult(call.id, call.name, "ok", f"got {answer.answers} {answer.accept}")

    return tool


def order_turn() -> TurnInput:
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "1"}}]},
        {"reply": "{results}"},
    )
    return start(text)


def test_a_call_that_asks_for_input_parks_the_turn_as_an_approval() -> None:
    recording = run_in_process(order_turn(), follow_directives, asking(1))
    assert kinds(recording) == ["CallModel", "CallTool", "AskApproval"]
    ask = recording.commands[-1]
    assert isinstance(ask, AskApproval)
    assert (ask.request_id, ask.asked) == ("t1r1-call_0-input1", ASKED)
    final = recording.final
    assert final is not None
    assert isinstance(final.phase, AwaitingApproval)
    assert final.phase.approval.asked == ASKED


def answered(first: Recording, approve: bool, legs: int) -> Recording:
    assert first.final is not None
    phase = first.final.phase
    assert isinstance(phase, AwaitingApproval)
    answers = {"quantity": {"n": 3}} if approve else {}
    approval = msgspec.structs.replace(phase.approval, answer=approve, answers=answers)
    turn = msgspec.structs.replace(
        first.final, phase=msgspec.structs.replace(phase, approval=approval)
    )
    return run_in_process(
        dataclasses.replace(order_turn(), turn=turn), follow_directives, asking(legs)
    )


def test_the_answer_sends_the_call_again_with_it_under_the_same_key() -> None:
    first = run_in_process(order_turn(), follow_directives, asking(1))
    recording = answered(first, approve=True, legs=1)
    assert kinds(recording) == ["CallTool", "CallModel", "Reply"]
    again = recording.commands[0]
    assert isinstance(again, CallTool)
    assert again.answer == InputAnswer(ASKED, True, {"quantity": {"n": 3}})
    (before,) = [c for c in first.commands if isinstance(c, CallTool)]
    assert again.idempotency_key == before.idempotency_key
    reply = recording.commands[-1]
    assert isinstance(reply, Reply)
    assert reply.text == "got {'quantity': {'n': 3}} True"


def test_a_declined_question_is_sent_as_declined_and_a_second_question_parks_again() -> None:
    first = run_in_process(order_turn(), follow_directives, asking(2))
    second = answered(first, approve=False, legs=2)
    assert kinds(second) == ["CallTool", "AskApproval"]
    again = second.commands[0]
    assert isinstance(again, CallTool)
    assert again.answer is not None
    assert not again.answer.accept
    ask = second.commands[-1]
    assert isinstance(ask, AskApproval)
    assert ask.request_id == "t1r1-call_0-input2"


def test_an_approved_ask_call_that_then_asks_for_input_parks_again() -> None:
    first = run(guarded(ask_then_more()))
    assert first.final is not None
    phase = first.final.phase
    assert isinstance(phase, AwaitingApproval)
    approved = msgspec.structs.replace(phase.approval, answer=True)
    turn = msgspec.structs.replace(
        first.final, phase=msgspec.structs.replace(phase, approval=approved)
    )
    recording = run_in_process(
        TurnInput("acme.bot", turn, (), GUARDED_TOOLS), follow_directives, asking(1)
    )
    assert kinds(recording) == ["CallTool", "AskApproval"]
    ask = recording.commands[-1]
    assert isinstance(ask, AskApproval)
    assert ask.request_id == "t1r1-call_0-input1"
    assert recording.final is not None
    assert isinstance(recording.final.phase, AwaitingApproval)
    assert [c.name for c in recording.final.phase.remaining] == ["calculator"]


def test_a_spawn_the_driver_refuses_is_not_pending_and_the_model_reads_why() -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    given = start(fan_out_script(2), spec)
    turn = run_turn(given)
    command = next(turn)
    refusal = "No more helpers may be started: the tenant has its most agents."
    while not isinstance(command, CallModel) or command.request.round < 2:
        if isinstance(command, CallModel):
            result: Result = follow_directives(command.request)
        elif isinstance(command, Spawn):
            refused = command.child.endswith("c1")
            result = Spawned(command.child, refusal if refused else "")
        else:
            result = Ack()
        command = turn.send(result)
    shown = [m.content for m in command.request.messages if m.role == "tool"]
    assert shown[1] == refusal
    assert shown[0].startswith("Started helper acme.bot.t1r1c0.")
    wait = turn.send(follow_directives(command.request))
    assert wait == Wait(("acme.bot.t1r1c0",)), "only the child that exists is waited for"
