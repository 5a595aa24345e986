"""Notices to gateways: off the writer's path, merged while one is in flight, one queue per
gateway, and a gateway that is down or slow never holds a write up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.projection import Projected, ProjectedBatch
from services.projection.notify import NOTIFY_PATH, TOKEN_HEADER, Notifier
from services.projection.projector import Projection
from tests.projection.test_store import timeline

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Gateways:
    """Gateways behind `httpx.MockTransport`: `up` answers, `down` refuses connections,
    `stuck` answers only once `release` is set."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}
        self.refusing = True
        """Whether `flaky` refuses connections."""
        self.received: dict[str, list[ProjectedBatch]] = {}
        self.tokens: list[str | None] = []
        self.release = asyncio.Event()
        self.arrived = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.attempts[host] = self.attempts.get(host, 0) + 1
        if host == "down" or (host == "flaky" and self.refusing):
            raise httpx.ConnectError("connection refused", request=request)
        if host == "stuck":
            await self.release.wait()
        assert request.url.path == NOTIFY_PATH
        self.tokens.append(request.headers.get(TOKEN_HEADER))
        batch = msgspec.json.decode(request.content, type=ProjectedBatch)
        self.received.setdefault(host, []).append(batch)
        self.arrived.set()
        return httpx.Response(200, json={"agents": len(batch.agents), "followed": 0})

    async def until(self, condition: Callable[[], bool], seconds: float = 5.0) -> None:
        async def wait() -> None:
            while not condition():
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), seconds)


async def test_every_gateway_is_told_and_one_that_is_down_holds_nothing_up(
    tmp_path: Path,
) -> None:
    gateways = Gateways()
    async with httpx.AsyncClient(transport=httpx.MockTransport(gateways)) as client:
        notifier = Notifier(["http://down", "http://a", "http://b/"], "secret", client)
        projection = Projection(tmp_path / "p.db", notifier.tell)
        await projection.record(events=timeline("acme.x", 1))
        await gateways.until(lambda: len(gateways.received) == 2)
        await projection.close()
        await notifier.close()
    told = ProjectedBatch((Projected("acme.x", 3),))
    assert gateways.received == {"a": [told], "b": [told]}
    assert gateways.tokens == ["secret", "secret"]


async def test_a_stuck_gateway_neither_slows_writes_nor_loses_what_piles_up(
    tmp_path: Path,
) -> None:
    gateways = Gateways()
    async with httpx.AsyncClient(transport=httpx.MockTransport(gateways)) as client:
        notifier = Notifier(["http://stuck"], "secret", client, timeout=30)
        projection = Projection(tmp_path / "p.db", notifier.tell)
        await projection.record(events=timeline("acme.x", 1))  # its notice is stuck
        await asyncio.sleep(0.05)
        for agent in ("acme.x", "acme.y"):
            await asyncio.wait_for(projection.record(events=timeline(agent, 2)[3:]), 5)
        gateways.release.set()
        await gateways.until(lambda: len(gateways.received.get("stuck", [])) == 2)
        await projection.close()
        await notifier.close()
    first, merged = gateways.received["stuck"]
    assert first == ProjectedBatch((Projected("acme.x", 3),))
    assert merged == ProjectedBatch((Projected("acme.x", 6), Projected("acme.y", 6)))


async def test_a_gateway_that_does_not_answer_in_time_is_given_up_on(tmp_path: Path) -> None:
    gateways = Gateways()
    async with httpx.AsyncClient(transport=httpx.MockTransport(gateways)) as client:
        notifier = Notifier(["http://stuck", "http://a"], "secret", client, timeout=0.05)
        notifier.tell({"acme.x": 3})
        await gateways.until(lambda: "a" in gateways.received)
        notifier.tell({"acme.x": 6})
        await gateways.until(lambda: len(gateways.received["a"]) == 2)
        await notifier.close()
    assert "stuck" not in gateways.received


async def test_a_gateway_that_is_down_is_tried_again_later_with_what_piled_up() -> None:
    gateways = Gateways()
    async with httpx.AsyncClient(transport=httpx.MockTransport(gateways)) as client:
        notifier = Notifier(["http://flaky"], "secret", client, retry_after=1.0)
        notifier.tell({"acme.x": 3})
        await asyncio.sleep(0.05)
        for seq in (6, 9):  # while it is down: no connection attempt per notice
            notifier.tell({"acme.x": seq, "acme.y": seq})
            await asyncio.sleep(0.05)
        assert gateways.attempts == {"flaky": 1}
        gateways.refusing = False
        await gateways.until(lambda: "flaky" in gateways.received)
        await notifier.close()
    assert gateways.attempts["flaky"] >= 2
    assert gateways.received["flaky"] == [
        ProjectedBatch((Projected("acme.x", 9), Projected("acme.y", 9)))
    ]


async def test_a_bad_gateway_url_is_refused_at_start() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.InvalidURL):
            Notifier(["http://exa mple:80:80"], "secret", client)
