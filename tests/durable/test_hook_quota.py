"""The tenant's agents (`TEASPILL_TENANT_AGENTS`) on a real stack, where other doors than
a message make agents: a webhook of a kind alone (a new agent per delivery) and a
schedule made for an address that has no agent yet."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.durable.conftest import eventually
from tests.durable.test_hooks import deliver, make_hook
from tests.gateway.test_stack import GatewayStack, gateway_stack

pytestmark = pytest.mark.durable

CEILING = 2
REFUSED = (
    f"tenant acme has {CEILING} agents, the most one tenant may have: send to an agent that "
    "exists, or ask the operator to raise TEASPILL_TENANT_AGENTS"
)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("hook-quota"), tenant_agents=CEILING) as stack:
        yield stack


def agents(gw: GatewayStack) -> list[str]:
    listed = gw.http.get("/v1/agents", headers=gw.auth)
    assert listed.status_code == 200, listed.text
    return sorted(agent["address"] for agent in listed.json()["agents"])


def listed(gw: GatewayStack, count: int) -> Callable[[], bool | None]:
    return lambda: len(agents(gw)) == count or None


def test_a_kind_hook_makes_no_agent_past_the_tenants_ceiling(gw: GatewayStack) -> None:
    hook = make_hook(gw, kind="calc", template="Ticket {{ id }}")
    for n in range(CEILING):
        made = deliver(gw, hook, f"ticket-{n}", {"id": n})
        assert made.status_code == 202, made.text
        eventually(listed(gw, n + 1), 120.0, f"agent {n + 1} listed")

    third = deliver(gw, hook, "ticket-third", {"id": 99})
    assert third.status_code == 429, third.text
    assert third.json()["error"]["message"] == REFUSED

    schedule = {"text": "Check in.", "every": "1h", "kind": "calc"}
    later = gw.http.post("/v1/agents/acme.later/schedules", json=schedule, headers=gw.auth)
    assert later.status_code == 429, later.text
    assert later.json()["error"]["message"] == REFUSED

    existing = agents(gw)[0]
    kept = gw.http.post(f"/v1/agents/{existing}/schedules", json=schedule, headers=gw.auth)
    assert kept.status_code == 201, kept.text
    assert len(agents(gw)) == CEILING
    assert all(
        address.startswith(f"acme.hook-{hook['id'].split('.')[1]}-") for address in agents(gw)
    )
