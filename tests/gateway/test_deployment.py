"""What the deployment offers a key's tenant, and keys that carry a name."""

from __future__ import annotations

import msgspec
import pytest

from schemas.events import ApprovalRequested, Event, EventBody, TurnStarted
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, PublishedSpec
from services.keys import new_key
from tests.gateway.conftest import T0, World

pytestmark = pytest.mark.anyio

REQUEST = "t3r1-call_0"
APPROVALS = f"/v1/agents/acme.alpha/approvals/{REQUEST}"


async def waiting(world: World) -> None:
    """acme.alpha (12 events, 2 turns) starts turn 3, which asks for approval."""
    bodies: list[EventBody] = [
        TurnStarted("go", "helper", 1),
        ApprovalRequested(REQUEST, "call_0", "ledger"),
    ]
    await world.record(
        [Event("acme.alpha", seq, 3, 1, T0, body) for seq, body in enumerate(bodies, start=13)]
    )


async def test_the_deployment_says_its_models_tools_and_the_tenants_kinds(world: World) -> None:
    newer = AgentSpec("helper", "Help more.", model="script", version=2)
    await world.store.record_spec(PublishedSpec("acme", newer, T0))
    await world.store.record_spec(PublishedSpec("other", AgentSpec("secret", "x", version=1), T0))
    response = await world.client.get("/v1/deployment", headers=world.auth("read"))
    assert response.status_code == 200, response.text
    assert response.json() == {
        "models": ["script", "smollm2"],
        "tools": ["calculator"],
        "checked": True,
        "problem": "",
        "kinds": [{"kind": "helper", "version": 2, "model": "script"}],
    }


async def test_the_deployment_needs_a_key(world: World) -> None:
    response = await world.client.get("/v1/deployment")
    assert response.status_code == 401


async def test_a_named_key_is_shown_by_name_and_signs_its_approvals(world: World) -> None:
    made = await world.client.post(
        "/v1/keys", json={"scope": "write", "name": "alice"}, headers=world.auth("admin")
    )
    assert made.status_code == 201, made.text
    assert made.json()["info"]["name"] == "alice"
    plaintext, key = new_key("acme", "write", T0, "alice")
    await world.store.record_key(key)
    world.ingress.keys["acme"].append(key)
    me = await world.client.get("/v1/me", headers={"Authorization": f"Bearer {plaintext}"})
    assert me.json()["key_name"] == "alice"
    stored = await world.store.key_by_hash(key.hash)
    assert stored is not None
    assert stored.name == "alice"
    await waiting(world)
    auth = {"Authorization": f"Bearer {plaintext}"}
    answered = await world.client.post(APPROVALS, json={"approve": True}, headers=auth)
    assert answered.status_code == 202, answered.text
    assert world.ingress.sent[-1][1]["wake"]["by"] == f"alice ({key.id})"


async def test_a_key_name_a_person_cannot_read_is_refused(world: World) -> None:
    made = await world.client.post(
        "/v1/keys", json={"scope": "read", "name": "<script>"}, headers=world.auth("admin")
    )
    assert made.status_code == 422
    assert "name" in made.json()["error"]["message"]


def test_an_unnamed_key_of_an_older_version_still_decodes() -> None:
    old = b'{"id": "a", "tenant": "acme", "scope": "read", "hash": "h", "created_at": "%s"}' % (
        T0.isoformat().encode()
    )
    assert msgspec.json.decode(old, type=ApiKey).name == ""
