"""Artifacts through the gateway: served only to the key's tenant, and only for the agent
whose timeline records them."""

from __future__ import annotations

import hashlib

import pytest

from schemas.events import ArtifactWritten, Event
from services.workspace.artifacts import store_file
from tests.gateway.conftest import T0, World

pytestmark = pytest.mark.anyio


async def written(world: World, address: str, seq: int, content: bytes) -> str:
    source = world.settings.home / "source.bin"
    source.write_bytes(content)
    artifact = store_file(world.settings.home / "artifacts", source, "out.bin")
    body = ArtifactWritten("call_0", artifact.path, artifact.size, artifact.sha256)
    await world.record([Event(address, seq, 9, 0, T0, body)])
    return artifact.sha256


async def test_an_artifact_is_served_by_its_hash(world: World) -> None:
    sha = await written(world, "acme.alpha", 100, b"the report")
    response = await world.client.get(
        f"/v1/agents/acme.alpha/artifacts/{sha}", headers=world.auth("read")
    )
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == sha
    assert response.headers["content-type"] == "application/octet-stream"


async def test_an_artifact_is_not_served_for_another_agent_or_tenant(world: World) -> None:
    sha = await written(world, "acme.alpha", 100, b"private")
    beta = await world.client.get(
        f"/v1/agents/acme.beta/artifacts/{sha}", headers=world.auth("read")
    )
    assert beta.status_code == 404
    assert "has no artifact" in beta.json()["error"]["message"]
    other = await world.client.get(
        f"/v1/agents/acme.alpha/artifacts/{sha}", headers=world.auth("other")
    )
    assert other.status_code == 404
    anonymous = await world.client.get(f"/v1/agents/acme.alpha/artifacts/{sha}")
    assert anonymous.status_code == 401


async def test_a_hash_that_is_not_a_sha256_is_a_400(world: World) -> None:
    response = await world.client.get(
        "/v1/agents/acme.alpha/artifacts/..%2F..%2Fprojection.db", headers=world.auth("read")
    )
    assert response.status_code in (400, 404)
    bad = await world.client.get(
        "/v1/agents/acme.alpha/artifacts/" + "g" * 64, headers=world.auth("read")
    )
    assert bad.status_code == 400
    assert "not a sha256" in bad.json()["error"]["message"]
