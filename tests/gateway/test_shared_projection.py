"""A whole stack on the PostgreSQL projection (`TEASPILL_PROJECTION_URL`): the control
plane writes it, the gateway process reads it, and no SQLite file is made in the home; a
second gateway with a home of its own, which no projector notifies, follows a turn through
the database's notices."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from schemas.events import Event
from services.contracts import REBUILD, REBUILD_KEY, Empty
from services.projection.postgres import PostgresStore
from services.stack import Gateway
from services.stack.process import free_port
from tests.fixtures.postgres import Cluster
from tests.gateway.test_stack import (
    CALCULATE,
    SHAPE,
    SLOW,
    GatewayStack,
    Sse,
    _tag,
    ended,
    gateway_stack,
    recorded,
)

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


@pytest.mark.timeout(120)  # without the notices, the follower would wait ten minutes
def test_a_gateway_elsewhere_follows_a_turn_by_the_databases_notices(
    shared: tuple[GatewayStack, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Its home is not the control plane's, the projector tells only the first gateway,
    and its fallback poll is ten minutes: what reaches its follower after the replay came
    by PostgreSQL's NOTIFY."""
    gw, _ = shared
    home = tmp_path_factory.mktemp("gateway-elsewhere")
    elsewhere = Gateway(gw.settings.model_copy(update={"home": home, "gateway_port": free_port()}))
    address = "acme.elsewhere"
    gw.send(address, SLOW)
    before = gw.wait_for(address, "tool_finished")
    elsewhere.start()
    try:
        with (
            httpx.Client(base_url=elsewhere.url, timeout=30) as http,
            http.stream(
                "GET", f"/v1/agents/{address}/events?after={len(before)}", headers=gw.auth
            ) as response,
        ):
            assert response.status_code == 200
            frames = recorded(Sse(response).until(ended))
    finally:
        elsewhere.stop()
    events = gw.timeline(address)
    assert [_tag(e) for e in events] == [*SHAPE, "turn_ended"]
    assert [int(f.id or 0) for f in frames] == [e.seq for e in events[len(before) :]]
    assert not (home / "projection.db").exists()
