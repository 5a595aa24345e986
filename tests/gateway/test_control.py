"""Approvals and stop through the gateway: one-way sends keyed by the request, refused at
once where the projection shows they cannot apply. Ingress is faked."""

from __future__ import annotations

from datetime import timedelta

import pytest

from schemas.events import (
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    EventBody,
    TurnEnded,
    TurnStarted,
)
from schemas.wake import Approval, answer_key
from tests.gateway.conftest import T0, World

pytestmark = pytest.mark.anyio

REQUEST = "t3r1-call_0"
APPROVALS = f"/v1/agents/acme.alpha/approvals/{REQUEST}"


async def waiting(world: World, *more: EventBody) -> None:
    """acme.alpha (12 events, 2 turns) starts turn 3, which asks for approval."""
    bodies: list[EventBody] = [
        TurnStarted("write it down", "helper", 1),
        ApprovalRequested(REQUEST, "call_0", "ledger", {"entry": "x"}),
        *more,
    ]
    await world.record(
        [
            Event("acme.alpha", seq, 3, 1, T0 + timedelta(seconds=seq), body)
            for seq, body in enumerate(bodies, start=13)
        ]
    )


async def test_an_approval_is_sent_one_way_keyed_by_the_answer(world: World) -> None:
    await waiting(world)
    response = await world.client.post(
        APPROVALS, json={"approve": True, "note": "go"}, headers=world.auth("write")
    )
    assert response.status_code == 202, response.text
    assert response.json() == {
        "address": "acme.alpha",
        "invocation_id": "inv_1",
        "after_seq": 14,
        "events_url": "/v1/agents/acme.alpha/events?after=14",
        "request_id": REQUEST,
        "approve": True,
    }
    address, body, key = world.ingress.sent[-1]
    wake = body["wake"]
    sent = Approval(wake["request_id"], wake["approve"], wake["note"], wake["by"])
    assert (address, wake["type"], sent.request_id, sent.approve, sent.note) == (
        "acme.alpha",
        "approval",
        REQUEST,
        True,
        "go",
    )
    assert sent.by
    assert key == answer_key(sent)


async def test_a_retried_answer_is_the_same_send_and_a_different_one_is_another(
    world: World,
) -> None:
    await waiting(world)
    for answer in ({"approve": True}, {"approve": True}, {"approve": False}):
        response = await world.client.post(APPROVALS, json=answer, headers=world.auth("write"))
        assert response.status_code == 202
    keys = [key for _, _, key in world.ingress.sent]
    assert keys[0] == keys[1]
    assert keys[2] != keys[0]
    assert all(key and key.startswith(f"approval {REQUEST} ") for key in keys)


@pytest.mark.parametrize(
    ("after", "status", "says"),
    [
        ((), 404, f"has no approval request {REQUEST}"),
        ((ApprovalAnswered(REQUEST, True, by="k1"),), 409, "was already answered"),
        ((ApprovalAbandoned(REQUEST),), 409, "its turn ended"),
        ((TurnEnded("stopped", reason="Stopped on request."),), 409, "its turn ended"),
    ],
)
async def test_an_answer_the_timeline_shows_cannot_apply_is_refused_at_once(
    world: World, after: tuple[EventBody, ...], status: int, says: str
) -> None:
    if after:
        await waiting(world, *after)
    response = await world.client.post(
        APPROVALS, json={"approve": True}, headers=world.auth("write")
    )
    assert response.status_code == status
    assert says in response.json()["error"]["message"]
    assert world.ingress.sent == []


@pytest.mark.parametrize("approve", ["yes", "true", 1, 0, None, [True]])
async def test_approve_is_only_a_json_boolean(world: World, approve: object) -> None:
    await waiting(world)
    response = await world.client.post(
        APPROVALS, json={"approve": approve}, headers=world.auth("write")
    )
    assert response.status_code == 422
    assert "field 'approve'" in response.json()["error"]["message"]
    assert world.ingress.sent == []


async def test_ingress_down_is_a_503_sentence_not_a_wait(world: World) -> None:
    await waiting(world)
    assert (await world.client.get("/v1/me", headers=world.auth("write"))).status_code == 200
    world.ingress.down = True
    for path, body in ((APPROVALS, {"approve": True}), ("/v1/agents/acme.alpha/stop", None)):
        response = await world.client.post(path, json=body, headers=world.auth("write"))
        assert response.status_code == 503
        assert "Restate ingress cannot take the request" in response.json()["error"]["message"]


async def test_a_read_key_cannot_answer_or_stop(world: World) -> None:
    for path, body in ((APPROVALS, {"approve": True}), ("/v1/agents/acme.alpha/stop", None)):
        response = await world.client.post(path, json=body, headers=world.auth("read"))
        assert response.status_code == 403
    assert (world.ingress.sent, world.ingress.stops) == ([], [])


async def test_a_stop_is_sent_one_way_keyed_by_what_the_timeline_showed(world: World) -> None:
    first = await world.client.post("/v1/agents/acme.alpha/stop", headers=world.auth("write"))
    again = await world.client.post("/v1/agents/acme.alpha/stop", headers=world.auth("write"))
    await waiting(world)
    later = await world.client.post("/v1/agents/acme.alpha/stop", headers=world.auth("write"))
    assert [r.status_code for r in (first, again, later)] == [202, 202, 202]
    answer = first.json()
    assert (answer["address"], answer["after_seq"], answer["events_url"]) == (
        "acme.alpha",
        12,
        "/v1/agents/acme.alpha/events?after=12",
    )
    assert "timeline will show its outcome" in answer["message"]
    assert world.ingress.stops == [
        ("acme.alpha", "stop after 12"),
        ("acme.alpha", "stop after 12"),
        ("acme.alpha", "stop after 14"),
    ]


@pytest.mark.parametrize("address", ["acme.nobody", "other.secret"])
async def test_an_unknown_or_another_tenants_agent_cannot_be_stopped(
    world: World, address: str
) -> None:
    response = await world.client.post(f"/v1/agents/{address}/stop", headers=world.auth("write"))
    assert response.status_code == 404
    assert world.ingress.stops == []
