"""Compositions on a real stack: restate-server, the endpoint, the scripted model. Each
stage is a kind published for the test tenant; each report arrives as a wake."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from schemas.compose import Branch, Composition, Handoff, Loop, Parallel, Router, Rule, Sequential
from schemas.events import ChildReported, ChildSpawned, Event, HandedOff, TurnStarted
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.contracts import PUBLISH
from services.executor.scripted import script
from tests.durable.conftest import LiveStack, eventually
from tests.fixtures.tools import ledger_path, started_path

pytestmark = pytest.mark.durable

STAGES = ("c-draft", "c-edit", "c-polish", "c-fr", "c-de", "c-merge", "c-billing", "c-support")


@pytest.fixture(scope="module", autouse=True)
def stages(stack: LiveStack) -> None:
    """Every stage kind, published for the tenant of the test addresses."""
    for kind in (*STAGES, "c-scribe"):
        tools = ("ledger",) if kind == "c-scribe" else ()
        spec = AgentSpec(kind, f"You are {kind}.", model="script", tools=tools)
        stack.ingress.call(PUBLISH, spec, "test")


def composing(composition: Composition) -> AgentSpec:
    return AgentSpec("c-composer", "Compose.", model="script", composition=composition)


def bodies(stack: LiveStack, address: str, kind: type) -> list[object]:
    return [e.body for e in stack.events(address) if isinstance(e.body, kind)]


def spawned(stack: LiveStack, address: str) -> list[ChildSpawned]:
    return [b for b in bodies(stack, address, ChildSpawned) if isinstance(b, ChildSpawned)]


def run(stack: LiveStack, address: str, text: str, composition: Composition) -> str:
    stack.ingress.send_wake(address, Message(text, spec=composing(composition)))
    ended = stack.wait_for_turn_end(address, 1)
    assert ended.outcome == "succeeded", ended.reason
    return ended.reply


def test_a_sequential_runs_its_stages_in_order(stack: LiveStack, address: str) -> None:
    reply = run(stack, address, "hi", Sequential(("c-draft", "c-edit", "c-polish")))
    assert reply == "You said: You said: You said: hi"
    stages = spawned(stack, address)
    assert [(s.stage, s.kind) for s in stages] == [
        ("stage 1: c-draft", "c-draft"), ("stage 2: c-edit", "c-edit"),
        ("stage 3: c-polish", "c-polish"),
    ]  # fmt: skip
    for stage in stages:
        (started,) = bodies(stack, stage.child, TurnStarted)
        assert isinstance(started, TurnStarted)
        assert (started.spec_kind, started.parent) == (stage.kind, address)


def test_a_parallel_merges_its_branches_by_a_named_kind(stack: LiveStack, address: str) -> None:
    branches = (Branch("c-fr", "fr: {input}"), Branch("c-de", "de: {input}"))
    reply = run(stack, address, "hello", Parallel(branches, merge="c-merge"))
    assert reply == "You said: You said: fr: hello\n\nYou said: de: hello"
    assert [s.stage for s in spawned(stack, address)] == [
        "branch 1: c-fr", "branch 2: c-de", "merge: c-merge"
    ]  # fmt: skip


def test_a_loop_repeats_until_its_condition(stack: LiveStack, address: str) -> None:
    reply = run(stack, address, "go", Loop("c-edit", max_passes=4, until="said: You"))
    assert reply == "You said: You said: go"
    assert [s.stage for s in spawned(stack, address)] == ["pass 1: c-edit", "pass 2: c-edit"]


def test_a_router_never_reaches_a_kind_it_does_not_list(stack: LiveStack, address: str) -> None:
    router = Router(("c-billing", "c-support"))
    stack.ingress.send_wake(address, Message(script({"reply": "c-draft"}), spec=composing(router)))
    ended = stack.wait_for_turn_end(address, 1)
    assert ended.outcome == "failed"
    assert "which names none of its kinds (c-billing, c-support)" in ended.reason
    assert spawned(stack, address) == []

    other = f"{address}-named"
    stack.ingress.send_wake(other, Message(script({"reply": "c-support"}), spec=composing(router)))
    assert stack.wait_for_turn_end(other, 1).outcome == "succeeded"
    assert [(s.stage, s.kind) for s in spawned(stack, other)] == [("route: c-support", "c-support")]


def test_a_handoff_makes_the_next_message_go_to_the_new_kind(
    stack: LiveStack, address: str
) -> None:
    handoff = Handoff(("c-billing", "c-support"), pick="rules", default="c-support",
                      rules=(Rule("invoice", "c-billing"),))  # fmt: skip
    assert run(stack, address, "my invoice", handoff) == "You said: my invoice"
    stack.ingress.send_wake(address, Message("and again"))
    second = stack.wait_for_turn_end(address, 2)
    assert second.reply == "You said: and again"
    started = [b for b in bodies(stack, address, TurnStarted) if isinstance(b, TurnStarted)]
    assert [(s.spec_kind, s.spec_version) for s in started] == [("c-composer", 0),
                                                                ("c-billing", 1)]  # fmt: skip
    (handed,) = bodies(stack, address, HandedOff)
    assert isinstance(handed, HandedOff)
    assert handed.kind == "c-billing"


def branch_script(index: int) -> str:
    """A branch that sleeps in its model step, then writes one ledger entry, then replies."""
    call = {"name": "ledger", "arguments": {"entry": f"branch {index}"}}
    return script({"sleep": 4, "calls": [call]}, {"reply": f"branch {index}: {{results}}"})


def lines(path: Path, prefix: str) -> list[str]:
    text = path.read_text() if path.exists() else ""
    return [line.split("\t")[1] for line in text.splitlines() if line.startswith(prefix)]


def test_a_sigkill_during_a_parallel_fan_out_loses_no_branch_and_runs_none_twice(
    stack: LiveStack, address: str
) -> None:
    branches = tuple(Branch("c-scribe", branch_script(i)) for i in range(3))
    stack.ingress.send_wake(address, Message("fan out", spec=composing(Parallel(branches))))
    children = [f"{address}.t1r1c{i}" for i in range(3)]
    eventually(
        lambda: all(stack.ingress.status(c).state == "running" for c in children) or None,
        60,
        "every branch to be in its slow model step",
    )
    stack.restart_endpoint(kill=True)
    ended = stack.wait_for_turn_end(address, 1)

    assert ended.outcome == "succeeded", ended.reason
    assert ended.reply == "\n\n".join(f"branch {i}: recorded branch {i}" for i in range(3))
    entries = Counter(lines(ledger_path(stack.home), f"{address}."))
    assert entries == Counter({f"branch {i}": 1 for i in range(3)}), "each branch's effect once"
    assert Counter(lines(started_path(stack.home), f"{address}.")) == entries
    assert [s.child for s in spawned(stack, address)] == children
    reports = [
        b.child for b in bodies(stack, address, ChildReported) if isinstance(b, ChildReported)
    ]
    assert sorted(reports) == children, "each branch reported once"
    for child in children:
        events: list[Event] = stack.events(child)
        assert sum(isinstance(e.body, TurnStarted) for e in events) == 1
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
