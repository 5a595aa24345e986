"""Crashes mid-run: nothing lost, nothing run twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from schemas.events import Event, ToolCalled, ToolFinished, TurnStarted
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
    stack.restart_restate(kill=False)
    ended = stack.wait_for_turn_end(address, 1)

    assert ended.outcome == "succeeded"
    assert ended.reply == "slept through it"
    assert_contiguous(stack.events(address))


AGENTS = 10
SLOW = 20.0
"""How long each agent's middle call sleeps: long enough for all ten to be inside it at
once on a loaded machine; the calls interrupted by the kill finish on their own later."""


def test_sigkill_of_restate_server_with_ten_turns_mid_call_loses_and_repeats_nothing(
    stack: LiveStack, address: str
) -> None:
    addresses = [f"{address}-{n}" for n in range(AGENTS)]
    text = ledger_calls(("before", 0), ("during", SLOW), ("after", 0))
    for each in addresses:
        stack.ingress.send_wake(each, Message(text, spec=SPEC))

    def all_inside() -> bool | None:
        started = read(started_path(stack.home))
        return all("during" in lines_for(started, each) for each in addresses) or None

    eventually(all_inside, 120, "every agent's slow call to start")
    stack.restate.kill()
    in_flight = {
        each for each in addresses if "during" not in lines_for(read(ledger_path(stack.home)), each)
    }
    stack.restate.start()

    for each in addresses:
        assert_turn_survived(stack, each, interrupted=each in in_flight)

    def every_call_done() -> bool | None:
        ledger = read(ledger_path(stack.home))
        return all("during" in lines_for(ledger, each) for each in addresses) or None

    eventually(every_call_done, 2 * SLOW + 30, "the interrupted calls to finish")
    for path in (started_path, ledger_path):
        lines = read(path(stack.home))
        for each in addresses:
            assert Counter(lines_for(lines, each)) == Counter(
                {"before": 1, "during": 1, "after": 1}
            ), f"each call of {each} ran once ({path(stack.home).name})"


def assert_turn_survived(stack: LiveStack, address: str, *, interrupted: bool) -> None:
    ended = stack.wait_for_turn_end(address, 1)
    assert ended.outcome == "succeeded"
    events = stack.events(address)
    assert_contiguous(events)
    statuses = tool_statuses(events)
    assert statuses["before"] == statuses["after"] == "ok"
    # Unknown only for the call the kill cut short (unless it had already written its line).
    assert statuses["during"] in (("ok", "unknown") if interrupted else ("ok",))
    if statuses["during"] == "unknown":
        assert "may or may not have taken effect" in ended.reply
    eventually(lambda: stack.shown(address) == events or None, 30, "the projection's copy")


def tool_statuses(events: list[Event]) -> dict[str, str]:
    """Each ledger call's status, by the entry it wrote (the calls run one after another,
    and each round's call has the same id)."""
    entries = [str(e.body.arguments["entry"]) for e in events if isinstance(e.body, ToolCalled)]
    statuses = [e.body.status for e in events if isinstance(e.body, ToolFinished)]
    assert len(entries) == len(statuses), "every call finished once"
    return dict(zip(entries, statuses, strict=True))
