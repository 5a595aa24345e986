"""The registry with its deadline wrapper: a call that never returns fails at its
deadline with a sentence, a side-effecting one with an unknown outcome, run once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas.chat import ToolCall, ToolDefinition
from services.effects.ledger import MemoryLedger
from services.tools.base import FunctionTool, ToolContext
from services.tools.deadline import MAX_OVERDUE, WithDeadline
from services.tools.registry import ToolRegistry

DEADLINE = 0.3


class Hanging:
    """Tools that block until `release` is set, counting their calls."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.calls += 1
        self.release.wait()
        return "finally"


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    tool = Hanging()
    yield tool
    tool.release.set()


def registry(home: Path, *tools: FunctionTool) -> ToolRegistry:
    return ToolRegistry([WithDeadline(tool, DEADLINE) for tool in tools], home, MemoryLedger())


def tool(name: str, function: Any, *, effects: bool = False) -> FunctionTool:
    return FunctionTool(ToolDefinition(name, f"The {name} tool."), function, effects)


def call(name: str, id_: str = "call_0") -> ToolCall:
    return ToolCall(id_, name, {})


def test_a_tool_that_never_returns_fails_at_its_deadline(tmp_path: Path, hanging: Hanging) -> None:
    tools = registry(tmp_path, tool("hang", hanging))
    started = time.monotonic()
    result = tools.run(call("hang"), "a.b/1/1/call_0", "a.b")
    assert DEADLINE <= time.monotonic() - started < DEADLINE + 0.5
    assert result.status == "error"
    assert result.content == (
        "The tool hang did not finish within its deadline of 0.3 s and was given up; it "
        "returned nothing."
    )


def test_a_side_effect_past_its_deadline_is_unknown_and_never_run_again(
    tmp_path: Path, hanging: Hanging
) -> None:
    tools = registry(tmp_path, tool("post", hanging, effects=True))
    first = tools.run(call("post"), "a.b/1/1/call_0", "a.b")
    again = tools.run(call("post"), "a.b/1/1/call_0", "a.b")
    assert first.status == "unknown"
    assert "may or may not have taken effect. It was not run again." in first.content
    assert (again.status, again.content) == (first.status, first.content)
    assert hanging.calls == 1


def test_a_timeout_the_tool_raises_itself_is_its_own_failure(tmp_path: Path) -> None:
    def times_out(arguments: dict[str, Any], context: ToolContext) -> str:
        raise TimeoutError("the socket timed out")

    result = registry(tmp_path, tool("fetch", times_out)).run(call("fetch"), "k", "a.b")
    assert result.status == "error"
    assert "unexpected error" in result.content
    assert "deadline" not in result.content
    assert "TimeoutError" not in result.content
    assert "socket" not in result.content


def test_a_tool_whose_calls_keep_hanging_is_refused_until_they_end(
    tmp_path: Path, hanging: Hanging
) -> None:
    tools = registry(tmp_path, tool("hang", hanging))
    for n in range(MAX_OVERDUE):
        assert "deadline" in tools.run(call("hang", f"call_{n}"), f"k{n}", "a.b").content
    started = time.monotonic()
    refused = tools.run(call("hang", "call_x"), "kx", "a.b")
    assert time.monotonic() - started < 0.1, "refused without waiting for the deadline"
    assert refused.content.startswith(f"The tool hang is refused for now: {MAX_OVERDUE} of")
    assert hanging.calls == MAX_OVERDUE

    hanging.release.set()
    for thread in threading.enumerate():
        if thread.name == "tool hang":
            thread.join(5)
    again = tools.run(call("hang", "call_y"), "ky", "a.b")
    assert (again.status, again.content) == ("ok", "finally")


def test_a_quick_tool_answers_as_if_unwrapped(tmp_path: Path) -> None:
    def echo(arguments: dict[str, Any], context: ToolContext) -> str:
        return f"{context.agent} {context.idempotency_key}"

    result = registry(tmp_path, tool("echo", echo)).run(call("echo"), "key-1", "a.b")
    assert (result.status, result.content) == ("ok", "a.b key-1")
    assert result.started is not None
    assert result.finished is not None
