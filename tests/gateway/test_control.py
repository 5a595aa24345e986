"""Approvals and stop through the gateway, with ingress faked."""

from __future__ import annotations

import pytest

from schemas.events import Approvals
from tests.gateway.conftest import World

pytestmark = pytest.mark.anyio


async def test_an_approval_is_sent_one_way_keyed_by_its_request(world: World) -> None:
    world.ingress.approvals["acme.alpha"] = Approvals(pending="t2r1-call_0")
    response = await world.client.post(
        "/v1/agents/acme.alpha/approvals/t2r1-call_0",
        json={"approve": True, "note": "go"},
        headers=world.auth("write"),
    )
    assert response.status_code == 202
    assert response.json()["approve"] is True
    address, body, key = world.ingress.sent[-1]
    assert (address, key) == ("acme.alpha", "approval t2r1-call_0")
    wake = body["wake"]
    assert (wake["type"], wake["request_id"], wake["approve"], wake["note"]) == (
        "approval",
        "t2r1-call_0",
        True,
        "go",
    )
    assert wake["by"]


@pytest.mark.parametrize(
    ("known", "status", "says"),
    [
        (Approvals(), 404, "has no pending approval"),
        (Approvals(pending="t9r1-call_0"), 404, "has no pending approval"),
        (Approvals(answered=("t2r1-call_0",)), 409, "was already answered"),
    ],
)
async def test_an_answer_to_no_pending_request_changes_nothing(
    world: World, known: Approvals, status: int, says: str
) -> None:
    world.ingress.approvals["acme.alpha"] = known
    response = await world.client.post(
        "/v1/agents/acme.alpha/approvals/t2r1-call_0",
        json={"approve": True},
        headers=world.auth("write"),
    )
    assert response.status_code == status
    assert says in response.json()["error"]["message"]
    assert world.ingress.sent == []


async def test_a_read_key_cannot_answer_or_stop(world: World) -> None:
    for path, body in (
        ("/v1/agents/acme.alpha/approvals/t2r1-call_0", {"approve": True}),
        ("/v1/agents/acme.alpha/stop", None),
    ):
        response = await world.client.post(path, json=body, headers=world.auth("read"))
        assert response.status_code == 403


async def test_stop_says_whether_there_was_anything_to_stop(world: World) -> None:
    idle = await world.client.post("/v1/agents/acme.alpha/stop", headers=world.auth("write"))
    assert (idle.status_code, idle.json()["stopping"]) == (200, False)
    world.ingress.running.add("acme.alpha")
    busy = await world.client.post("/v1/agents/acme.alpha/stop", headers=world.auth("write"))
    assert (busy.status_code, busy.json()["stopping"]) == (202, True)


async def test_another_tenants_agent_cannot_be_stopped(world: World) -> None:
    world.ingress.running.add("other.secret")
    response = await world.client.post("/v1/agents/other.secret/stop", headers=world.auth("write"))
    assert response.status_code == 404
