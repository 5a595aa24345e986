"""The quotas a tenant's agents share, held where the work runs (the `TenantUsage`
object): the day's model tokens, decided before a turn starts however the work began (a
spawn, a message straight through ingress) and never cutting a turn that started, and
the agents, refused at a spawn. Counted once per model step, through a SIGKILL of the
endpoint too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from schemas.events import Event, MessageRejected, ModelMessage, ToolFinished, TurnStarted
from schemas.lifecycle import ForkRequest
from schemas.spec import AgentSpec, Limits
from schemas.tenant import TokensQuery
from schemas.wake import Message
from services.contracts import AGENT, FORK, TOKENS
from services.executor.scripted import script
from services.ingress import IngressError
from services.stack.journal import RestateAdmin
from tests.durable.conftest import LiveStack, eventually, live_stack, stack_settings
from tests.fixtures.tools import started_path

pytestmark = pytest.mark.durable

DAILY = 4000
AGENTS = 4
SPEC = AgentSpec(
    kind="spender",
    instructions="Follow the script.",
    model="spender",
    tools=("calculator", "ledger"),
    can_spawn=True,
    limits=Limits(max_rounds=60, max_tokens=8),
)
"""On the model that reports what a real one would use (tests/fixtures/models.py)."""
CALCULATE = {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    home: Path = tmp_path_factory.mktemp("tenant-usage")
    settings = stack_settings(home).model_copy(
        update={"tenant_daily_tokens": DAILY, "tenant_agents": AGENTS}
    )
    with live_stack(settings) as stack:
        yield stack


def spawn(task: str) -> dict[str, Any]:
    return {"name": "spawn_agent", "arguments": {"task": task}}


def refusal(tenant: str) -> str:
    return (
        f"Tenant {tenant}'s agents used the day's {DAILY} model tokens "
        f"(TEASPILL_TENANT_DAILY_TOKENS) on {today()} (UTC): no turn starts until midnight UTC."
    )


def started(stack: LiveStack, address: str) -> list[int]:
    return [e.turn for e in stack.events(address) if isinstance(e.body, TurnStarted)]


def rejected(stack: LiveStack, address: str) -> list[str]:
    return [e.body.message for e in stack.events(address) if isinstance(e.body, MessageRejected)]


def today() -> str:
    return datetime.now(UTC).date().isoformat()  # noqa: TID251 - the clock the stack runs on


def counted(stack: LiveStack, tenant: str) -> int:
    return stack.ingress.call(TOKENS, TokensQuery(today()), tenant).tokens


def counts_once(stack: LiveStack, tenant: str, *agents: str) -> int:
    """The tenant's count, once it is every model step on the agents' timelines, each
    once (a step counted twice never comes back down to it)."""
    every = spent([e for agent in agents for e in stack.events(agent)])
    eventually(lambda: counted(stack, tenant) == every or None, 30, f"{tenant}'s count")
    return every


def spent(events: list[Event]) -> int:
    return sum(
        e.body.usage.prompt_tokens + e.body.usage.completion_tokens
        for e in events
        if isinstance(e.body, ModelMessage)
    )


def rounds(events: list[Event], turn: int) -> int:
    return sum(isinstance(e.body, ModelMessage) for e in events if e.turn == turn)


def test_children_that_started_run_to_their_end_past_the_day_and_later_spawns_are_refused(
    small: LiveStack,
) -> None:
    long_child = script(*[CALCULATE] * 10, {"reply": "child done"})
    parent = script(
        {"calls": [spawn(long_child), spawn(long_child)]},
        {"calls": [{"name": "wait"}]},
        {"calls": [spawn(script({"reply": "never"}))]},
        {"calls": [{"name": "wait"}]},
        {"reply": "children: {results}"},
    )
    small.ingress.send_wake("spend.parent", Message(parent, spec=SPEC))
    other = script(CALCULATE, CALCULATE, {"reply": "other tenant done"})
    small.ingress.send_wake("other.agent", Message(other, spec=SPEC))

    assert small.wait_for_turn_end("other.agent", 1).outcome == "succeeded"
    ended = small.wait_for_turn_end("spend.parent", 1)
    assert ended.outcome == "succeeded", ended.reason
    children = ["spend.parent.t1r1c0", "spend.parent.t1r1c1"]
    for child in children:
        assert small.wait_for_turn_end(child, 1).reply == "child done"
        assert rounds(small.events(child), 1) == 11, "no round of a started turn was cut"
    late = "spend.parent.t1r3c0"
    assert started(small, late) == []
    assert rejected(small, late) == [refusal("spend")]
    assert refusal("spend") in ended.reply, "the parent was told why its helper did not run"
    assert counts_once(small, "spend", "spend.parent", *children) >= DAILY
    assert counts_once(small, "other", "other.agent") < DAILY


def test_a_message_straight_through_ingress_past_the_day_is_refused_before_its_turn(
    small: LiveStack,
) -> None:
    text = script(*[CALCULATE] * 30, {"reply": "spent"})
    small.ingress.send_wake("direct.one", Message(text, spec=SPEC))
    assert small.wait_for_turn_end("direct.one", 1).reply == "spent"
    assert rounds(small.events("direct.one"), 1) == 31
    used = counts_once(small, "direct", "direct.one")
    assert used >= DAILY

    with pytest.raises(IngressError) as refused:
        small.ingress.message("direct.one", script({"reply": "hello"}), SPEC)
    assert (refused.value.status, refused.value.message) == (429, refusal("direct"))
    assert started(small, "direct.one") == [1]
    assert rejected(small, "direct.one") == [refusal("direct")]
    assert counted(small, "direct") == used


def test_a_spawn_past_the_tenants_agents_is_refused_and_no_agent_beyond_exists(
    small: LiveStack,
) -> None:
    leaf = script({"reply": "leaf"})
    parent = script(
        {"calls": [spawn(leaf) for _ in range(6)]},
        {"calls": [{"name": "wait"}]},
        {"reply": "done: {results}"},
    )
    small.ingress.send_wake("crowd.parent", Message(parent, spec=SPEC))
    assert small.wait_for_turn_end("crowd.parent", 1).outcome == "succeeded"

    with RestateAdmin(small.settings.admin_url) as admin:
        rows = admin.query(
            "SELECT DISTINCT service_key FROM state"  # noqa: S608 - a tenant the test made
            f" WHERE service_name = '{AGENT}' AND service_key LIKE 'crowd.%'"
        )
    made = sorted(str(row["service_key"]) for row in rows)
    assert len(made) == AGENTS, made  # the parent and three of its six children
    refused = [
        e.body.content
        for e in small.events("crowd.parent")
        if isinstance(e.body, ToolFinished) and e.body.status == "error"
    ]
    assert (
        refused
        == [
            "No more helpers may be started: tenant crowd has 4 agents, the most one tenant may "
            "have (TEASPILL_TENANT_AGENTS)."
        ]
        * 3
    )


def test_sigkill_mid_turn_counts_each_model_step_once(small: LiveStack) -> None:
    slow = {"calls": [{"name": "ledger", "arguments": {"entry": "slow", "seconds": 30}}]}
    text = script(CALCULATE, slow, CALCULATE, {"reply": "done"})
    address = "crash.one"
    small.ingress.send_wake(address, Message(text, spec=SPEC))
    eventually(
        lambda: (
            any(line.startswith(f"{address}/") for line in _lines(started_path(small.home))) or None
        ),
        60,
        "the slow ledger step to start",
    )
    small.restart_endpoint(kill=True)
    assert small.wait_for_turn_end(address, 1).outcome == "succeeded"

    assert rounds(small.events(address), 1) == 4
    counts_once(small, "crash", address)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_forks_count_against_the_tenants_agents(small: LiveStack) -> None:
    small.ingress.message("branchy.origin", script({"reply": "hi"}), SPEC)
    for n in range(AGENTS - 1):
        small.ingress.call(FORK, ForkRequest("branchy.origin", 1), f"branchy.fork{n}")

    with pytest.raises(IngressError) as refused:
        small.ingress.call(FORK, ForkRequest("branchy.origin", 1), "branchy.past")

    assert refused.value.status == 429, refused.value.message
    assert "tenant branchy has 4 agents" in refused.value.message
    assert small.ingress.timeline("branchy.past").events == ()
