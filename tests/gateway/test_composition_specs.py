"""Publishing a composition through the gateway: checked at the edge, like any spec."""

from __future__ import annotations

import pytest

from schemas.compose import Sequential
from tests.gateway.conftest import World

pytestmark = pytest.mark.anyio


async def test_a_composition_past_its_budget_is_a_422_sentence_and_nothing_is_published(
    world: World,
) -> None:
    branches = [{"kind": f"k{i}"} for i in range(9)]
    spec = {
        "kind": "wide",
        "instructions": "x",
        "composition": {"type": "parallel", "branches": branches},
    }
    response = await world.client.post("/v1/specs", json=spec, headers=world.auth("admin"))
    assert response.status_code == 422
    assert response.json()["error"]["message"] == (
        "The spec in the request body: field 'composition' starts up to 9 agents a turn, past "
        "its limits.max_children of 8: raise the limit or start fewer stages."
    )
    assert world.ingress.published == {}


async def test_a_composition_that_fits_is_published_as_data(world: World) -> None:
    spec = {"kind": "chain", "instructions": "x",
            "composition": {"type": "sequential", "stages": ["a", "b"]}}  # fmt: skip
    response = await world.client.post("/v1/specs", json=spec, headers=world.auth("admin"))
    assert response.status_code == 201, response.text
    published = response.json()["spec"]["composition"]
    assert published == {"type": "sequential", "stages": ["a", "b"]}
    (versions,) = world.ingress.published.values()
    assert versions.versions[-1].spec.composition == Sequential(("a", "b"))
