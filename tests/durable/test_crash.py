"""Crashes mid-run: nothing lost, nothing run twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from schemas.events import Event, ToolFinished, TurnStarted
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.executor.scripted import script
from tests.durable.conftest import LiveStack, eventually
from tests.fixtures.tools import ledger_path, started_path

pytestmark = pytest.mark.durable

SPEC = AgentSpec(kind="crash", instructions="Follow the script.", model="script", tools=("ledger",))


def ledger_calls(*entries: tuple[str, float]) -> str:
    lines = [
        {"calls": [{"name": "ledger", "arguments": {"entry": entry, "seconds": seconds}}]}
        for entry, seconds in entries
    ]
    return script(*lines, {"reply": "done: {results}"})


def lines_for(path_lines: list[str], address: str) -> list[str]:
    return [line.split("\t")[1] for line in path_lines if line.startswith(f"{address}/")]


def read(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def assert_contiguous(events: list[Event]) -> None:
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert sum(isinstance(e.body, TurnStarted) for e in events) == 1


def test_sigkill_during_a_slow_tool_step_loses_nothing_and_repeats_nothing(
    stack: LiveStack, address: str
) -> None:
    text = ledger_calls(("before", 0), ("during", 30), ("after", 0))
    stack.ingress.send_wake(address, Message(text, spec=SPEC))
    eventually(
        lambda: "during" in lines_for(read(started_path(stack.home)), address) or None,
        60,
        "the slow ledger step to start",
    )
    stack.restart_endpoint(kill=True)
    ended = stack.wait_for_turn_end(address, 1)

    assert ended.outcome == "succeeded"
    ledger = Counter(lines_for(read(ledger_path(stack.home)), address))
    assert ledger == Counter({"before": 1, "after": 1}), "each completed effect exactly once"
    events = stack.events(address)
    assert_contiguous(events)
    finished = [e.body.status for e in events if isinstance(e.body, ToolFinished)]
    assert finished == ["ok", "unknown", "ok"]
    assert "may or may not have taken effect" in ended.reply


def test_a_turn_survives_a_restart_of_restate_server(stack: LiveStack, address: str) -> None:
    text = script({"sleep": 3.0, "reply": "slept through it"})
    stack.ingress.send_wake(address, Message(text, spec=SPEC))
    eventually(lambda: stack.ingress.status(address).turn == 1 or None, 30, "the turn to start")
    stack.restate.stop()
    stack.restate.start()
    ended = stack.wait_for_turn_end(address, 1)

    assert ended.outcome == "succeeded"
    assert ended.reply == "slept through it"
    assert_contiguous(stack.events(address))
