"""A whole stack on the PostgreSQL projection (`TEASPILL_PROJECTION_URL`): the control
plane writes it, the gateway process reads it, and no SQLite file is made in the home."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from schemas.events import Event
from services.contracts import REBUILD, REBUILD_KEY, Empty
from services.projection.postgres import PostgresStore
from tests.fixtures.postgres import Cluster
from tests.gateway.test_stack import CALCULATE, SHAPE, GatewayStack, _tag, gateway_stack

pytestmark = pytest.mark.durable


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, postgres: Cluster
) -> Iterator[tuple[GatewayStack, str]]:
    url = postgres.database()
    with gateway_stack(tmp_path_factory.mktemp("shared-home"), projection_url=url) as stack:
        yield stack, url


def stored(url: str, address: str) -> list[Event]:
    async def read() -> list[Event]:
        async with await PostgresStore.open(url, readonly=True) as store:
            return await store.timeline(address, limit=1000)

    return asyncio.run(read())


def test_turns_memories_and_a_rebuild_go_through_postgresql(
    shared: tuple[GatewayStack, str],
) -> None:
    gw, url = shared
    gw.send("acme.shared", CALCULATE)
    events = gw.wait_for("acme.shared", "turn_ended")
    assert [_tag(e) for e in events][: len(SHAPE)] == SHAPE
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert stored(url, "acme.shared") == events
    assert not (gw.settings.home / "projection.db").exists()

    kept = gw.http.post(
        "/v1/memory", json={"text": "The kettle is in the zebrafinch cupboard"}, headers=gw.auth
    )
    assert kept.status_code == 201, kept.text
    found = gw.http.get("/v1/memory", params={"q": "zebrafinch kettle"}, headers=gw.auth)
    assert found.status_code == 200, found.text
    assert [hit["record"]["id"] for hit in found.json()["memories"]] == [kept.json()["id"]]

    report = gw.ingress.call(REBUILD, Empty(), REBUILD_KEY)
    assert report.events >= len(events)
    assert report.memories == 1
    assert stored(url, "acme.shared") == events
    again = gw.http.get("/v1/memory", params={"q": "zebrafinch"}, headers=gw.auth)
    assert [hit["record"]["id"] for hit in again.json()["memories"]] == [kept.json()["id"]]
    metrics = gw.http.get("/v1/agents/acme.shared", headers=gw.auth)
    assert metrics.status_code == 200, metrics.text
    assert metrics.json()["status"] == "idle"
