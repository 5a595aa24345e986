"""The tool registry's side of the effect ledger, on the in-memory ledger: a call retried
after it finished gets the recorded result, one retried after an interrupted start is
unknown, and neither runs the tool again. (On Restate: tests/durable/test_effects.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas.chat import ToolCall, ToolDefinition
from services.effects.ledger import MemoryLedger
from services.tools.base import UNKNOWN_OUTCOME, FunctionTool, ToolContext
from services.tools.registry import ToolRegistry

KEY = "acme.bot/1/1/call_0"
CALL = ToolCall("call_0", "charge", {"cents": 5})


def registry(home: Path, ledger: MemoryLedger, runs: list[str]) -> ToolRegistry:
    def charge(arguments: dict[str, Any], context: ToolContext) -> str:
        runs.append(context.idempotency_key)
        return f"charged {arguments['cents']} cents"

    tool = FunctionTool(ToolDefinition("charge", "Charges a card."), charge, effects=True)
    return ToolRegistry([tool], home, ledger)


def test_a_call_retried_after_it_finished_returns_the_recorded_result(tmp_path: Path) -> None:
    runs: list[str] = []
    ledger = MemoryLedger()
    first = registry(tmp_path / "a", ledger, runs).run(CALL, KEY, "acme.bot")
    again = registry(tmp_path / "b", ledger, runs).run(CALL, KEY, "acme.bot")
    assert (
        (again.status, again.content) == (first.status, first.content) == ("ok", "charged 5 cents")
    )
    assert runs == [KEY]


def test_a_call_retried_after_an_interrupted_start_is_unknown(tmp_path: Path) -> None:
    runs: list[str] = []
    ledger = MemoryLedger()
    assert ledger.begin(KEY).first  # an attempt that began and never finished
    result = registry(tmp_path, ledger, runs).run(CALL, KEY, "acme.bot")
    assert (result.status, result.content) == ("unknown", UNKNOWN_OUTCOME)
    assert runs == []


def test_a_tool_without_effects_does_not_use_the_ledger(tmp_path: Path) -> None:
    runs: list[str] = []

    def look(arguments: dict[str, Any], context: ToolContext) -> str:
        runs.append(context.idempotency_key)
        return "looked"

    ledger = MemoryLedger()
    tool = FunctionTool(ToolDefinition("look", "Reads something."), look)
    tools = ToolRegistry([tool], tmp_path, ledger)
    for _ in range(2):
        assert tools.run(ToolCall("c", "look", {}), KEY, "acme.bot").content == "looked"
    assert runs == [KEY, KEY], "a retried read runs again"
    assert ledger.begin(KEY).first, "nothing was written to the ledger"
