"""Run a turn in process, without Restate: for unit tests and quick experiments.

The same generator runs durably under the agent's driver; here each command is answered
by plain functions, and the commands are collected so a test can read them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from schemas.harness import (
    Ack,
    CallModel,
    CallTool,
    Command,
    Recall,
    Result,
    Spawn,
    Spawned,
    Summarize,
    Summary,
    ToolResult,
    TurnState,
)
from schemas.model import ModelReply, ModelRequest
from services.harness.loop import TurnInput, run_turn
from services.harness.recall import answer, parse

Model = Callable[[ModelRequest], ModelReply]
ToolRunner = Callable[[CallTool], ToolResult]


def echo_tool(command: CallTool) -> ToolResult:
    call = command.call
    return ToolResult(call.id, call.name, "ok", f"{call.name} ran with {call.arguments}")


@dataclass
class Recording:
    commands: list[Command] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    final: TurnState | None = None


def run_in_process(
    given: TurnInput,
    model: Model,
    tool: ToolRunner = echo_tool,
    harness: Callable[[TurnInput], Generator[Command, Result, TurnState]] = run_turn,
) -> Recording:
    """`harness`: the one to run (any registered harness runs here as under the driver)."""
    recording = Recording()
    turn = harness(given)
    try:
        command = next(turn)
        while True:
            recording.commands.append(command)
            result = _answer(command, model, tool)
            recording.results.append(result)
            command = turn.send(result)
    except StopIteration as stop:
        recording.final = stop.value
    return recording


def _answer(command: Command, model: Model, tool: ToolRunner) -> Result:
    match command:
        case CallModel(request=request):
            return model(request)
        case Summarize(request=request):
            return Summary(model(request))
        case Recall():
            return _recall(command)
        case CallTool():
            return tool(command)
        case Spawn(child=child):
            return Spawned(child)
    return Ack()


def _recall(command: Recall) -> ToolResult:
    """Reads the current turn only: in process there is no stored history."""
    call = command.call
    query = parse(call)
    if isinstance(query, str):
        return ToolResult(call.id, call.name, "error", query)
    found = [(command.turn, command.current)] if query.turn == command.turn else []
    return ToolResult(call.id, call.name, "ok", answer(query, found))
