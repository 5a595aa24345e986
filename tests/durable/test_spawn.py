"""Spawning children: the address comes back at once, the result later as a wake."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from schemas.events import ChildReported, ChildSpawned, ToolFinished, TurnEnded, Waiting
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message
from services.contracts import AGENT
from services.executor.scripted import script
from services.stack.journal import RestateAdmin
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable

SPEC = AgentSpec(kind="parent", instructions="Delegate.", model="script", can_spawn=True)


def spawn(task: str) -> dict[str, Any]:
    return {"name": "spawn_agent", "arguments": {"task": task}}


def test_spawn_returns_the_child_address_before_the_child_has_run(
    stack: LiveStack, address: str
) -> None:
    slow_child = script({"sleep": 2.0, "reply": "child is done"})
    parent = script(
        {"calls": [spawn(slow_child)]},
        {"calls": [{"name": "wait"}]},
        {"reply": "parent got: {results}"},
    )
    result = stack.ingress.message(address, parent, SPEC)

    assert result.status.state == "waiting"
    child = f"{address}.t1r1c0"
    events = stack.events(address)
    spawned = [e.body for e in events if isinstance(e.body, ChildSpawned)]
    assert [s.child for s in spawned] == [child]
    assert isinstance(events[-1].body, Waiting)
    assert not any(isinstance(e.body, TurnEnded) for e in stack.events(child))

    ended = stack.wait_for_turn_end(address, 1)
    assert ended.outcome == "succeeded"
    assert "child is done" in ended.reply
    reports = [e.body for e in stack.events(address) if isinstance(e.body, ChildReported)]
    assert [(r.child, r.outcome, r.reply) for r in reports] == [
        (child, "succeeded", "child is done")
    ]
    assert stack.ingress.status(address).state == "idle"


def test_fan_out_to_three_children_and_fan_in(stack: LiveStack, address: str) -> None:
    tasks = [script({"sleep": 0.2 * i, "reply": f"part {i}"}) for i in range(3)]
    parent = script(
        {"calls": [spawn(task) for task in tasks]},
        {"calls": [{"name": "wait"}]},
        {"reply": "all parts: {results}"},
    )
    stack.ingress.message(address, parent, SPEC)
    ended = stack.wait_for_turn_end(address, 1)

    assert ended.outcome == "succeeded"
    for i in range(3):
        assert f"part {i}" in ended.reply
    events = stack.events(address)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    reports = [e.body for e in events if isinstance(e.body, ChildReported)]
    assert sorted(r.child for r in reports) == [f"{address}.t1r1c{i}" for i in range(3)]
    models = [e for e in events if type(e.body).__name__ == "ModelMessage"]
    assert len(models) == 3, "the model runs once more only after all three reported"


def test_a_child_inherits_the_spec_and_its_failure_reaches_the_parent(
    stack: LiveStack, address: str
) -> None:
    calculate = {"calls": [{"name": "calculator", "arguments": {"expression": "1"}}]}
    endless_child = script(*[calculate] * 4)
    parent = script(
        {"calls": [spawn(endless_child)]}, {"calls": [{"name": "wait"}]}, {"reply": "{results}"}
    )
    spec = msgspec.structs.replace(SPEC, tools=("calculator",), limits=Limits(max_rounds=3))
    stack.ingress.message(address, parent, spec)

    child_end = stack.wait_for_turn_end(f"{address}.t1r1c0", 1)
    assert child_end.outcome == "failed"
    assert "all 3 rounds" in child_end.reason
    parent_end = stack.wait_for_turn_end(address, 1)
    assert parent_end.outcome == "succeeded"
    assert "(failed)" in parent_end.reply
    assert "all 3 rounds" in parent_end.reply


def fan_out(levels: int) -> str:
    """Spawns two helpers running `fan_out(levels - 1)`, waits for them and replies."""
    if levels == 0:
        return script({"reply": "leaf"})
    task = fan_out(levels - 1)
    return script({"calls": [spawn(task), spawn(task)]}, {"calls": [{"name": "wait"}]},
                  {"reply": "done"})  # fmt: skip


def test_one_message_spawning_past_its_descendant_budget_makes_no_agent_beyond_it(
    stack: LiveStack, address: str
) -> None:
    spec = msgspec.structs.replace(SPEC, limits=Limits(max_descendants=3))
    stack.ingress.send_wake(address, Message(fan_out(3), spec=spec))
    assert stack.wait_for_turn_end(address, 1).outcome == "succeeded"

    with RestateAdmin(stack.settings.admin_url) as admin:
        rows = admin.query(
            "SELECT DISTINCT service_key FROM state"  # noqa: S608 - an address the test made
            f" WHERE service_name = '{AGENT}' AND service_key LIKE '{address}.%'"
        )
    made = sorted(str(row["service_key"]) for row in rows)
    assert len(made) == 3, made  # unbounded, three levels of two would make 14 agents
    refused = [
        e.body.content
        for agent in (address, *made)
        for e in stack.events(agent)
        if isinstance(e.body, ToolFinished) and e.body.status == "error"
    ]
    assert len(refused) == 5
    assert all("may bring at most 3 agents into being in all" in r for r in refused)
