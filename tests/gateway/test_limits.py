"""Limits per key: requests per second (429 with Retry-After), open streams (429), how
long a key lookup is trusted; and how long a request body may take (408)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec
import pytest
from starlette.types import Message, Receive, Scope, Send

from schemas.tenant import ApiKey
from services.gateway.errors import ApiError
from services.gateway.limits import BodyLimitMiddleware
from services.gateway.rates import DailyCap, RateLimiter, StreamSlots
from services.keys import hash_key
from services.settings import Settings
from tests.gateway.conftest import LIVE_TOKEN, T0, World, make_world

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_refills_at_its_rate_and_says_when_to_retry() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, 3, clock)
    for _ in range(3):
        limiter.take("k1")
    with pytest.raises(ApiError) as refused:
        limiter.take("k1")
    assert refused.value.status == 429
    assert refused.value.headers == {"Retry-After": "1"}
    assert refused.value.message == (
        "API key k1 sent more than 2 requests a second (bursts of 3); retry in 1 s"
    )
    limiter.take("k2")
    clock.now += 0.5
    limiter.take("k1")
    with pytest.raises(ApiError):
        limiter.take("k1")
    clock.now += 60
    for _ in range(3):
        limiter.take("k1")


def test_a_slow_rate_asks_for_a_longer_wait() -> None:
    limiter = RateLimiter(0.1, 1, Clock())
    limiter.take("k1")
    with pytest.raises(ApiError) as refused:
        limiter.take("k1")
    assert refused.value.headers == {"Retry-After": "10"}


def test_a_daily_cap_counts_per_key_and_opens_again_at_midnight_utc() -> None:
    now = [datetime(2026, 12, 4, 23, 0, tzinfo=UTC)]
    cap = DailyCap(2, lambda key, limit, day: f"{key} did {limit} on {day}", lambda: now[0])
    cap.take("k1")
    cap.take("k1")
    cap.take("k2")
    with pytest.raises(ApiError) as refused:
        cap.take("k1")
    assert (refused.value.status, refused.value.message) == (429, "k1 did 2 on 2026-12-04")
    assert refused.value.headers == {"Retry-After": "3600"}
    now[0] = datetime(2026, 12, 5, 0, 0, 1, tzinfo=UTC)
    cap.take("k1")
    DailyCap(0, lambda *_: "never", lambda: now[0]).take("k1")


def test_a_stream_slot_is_given_back_once() -> None:
    slots = StreamSlots(2)
    first, second = slots.hold("k1"), slots.hold("k1")
    with pytest.raises(ApiError) as refused:
        slots.hold("k1")
    assert refused.value.status == 429
    assert refused.value.message == (
        "API key k1 has 2 streams open, the most one key may hold; close one first"
    )
    first()
    first()
    assert slots.held("k1") == 1
    second()
    assert slots.held("k1") == 0


def limited(home: Path, **overrides: object) -> Settings:
    base = {"home": home, "live_token": LIVE_TOKEN, "key_rate": 0.0, "key_streams": 1000}
    return Settings(**{**base, **overrides})  # type: ignore[arg-type]


async def test_past_the_rate_the_gateway_answers_429_with_retry_after(tmp_path: Path) -> None:
    async with make_world(tmp_path, limited(tmp_path, key_rate=0.1, key_burst=3)) as world:
        answers = [
            await world.client.get("/v1/agents", headers=world.auth("read")) for _ in range(4)
        ]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        refused = answers[-1]
        assert 1 <= int(refused.headers["Retry-After"]) <= 10
        assert "requests a second" in refused.json()["error"]["message"]
        other = await world.client.get("/v1/agents", headers=world.auth("write"))
        assert other.status_code == 200
        unlimited = await world.client.get("/v1/health")
        assert unlimited.status_code == 200


@contextlib.asynccontextmanager
async def stream(
    world: World, path: str = "/v1/agents/acme.alpha/events"
) -> AsyncIterator[httpx.Response]:
    request = world.streams.build_request("GET", path, headers=world.auth("read"))
    response = await world.streams.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


async def test_past_the_stream_cap_the_gateway_answers_429(tmp_path: Path) -> None:
    async with make_world(tmp_path, limited(tmp_path, key_streams=2)) as world:
        async with stream(world) as one, stream(world, "/v1/agents/acme.beta/events") as two:
            assert (one.status_code, two.status_code) == (200, 200)
            async with stream(world) as three:
                assert three.status_code == 429
                body = msgspec.json.decode(await three.aread())
                assert body["error"]["message"].endswith("close one first")
            agui = await world.client.post(
                "/v1/agui",
                json={"threadId": "acme.alpha", "runId": "r9", "messages": []},
                headers=world.auth("read"),
            )
            assert agui.status_code == 429
            other_key = await world.client.get(
                "/v1/agents/acme.alpha/timeline", headers=world.auth("write")
            )
            assert other_key.status_code == 200
        async with stream(world) as again:
            assert again.status_code == 200


async def test_a_revoked_key_stops_working_once_its_lookup_expires(tmp_path: Path) -> None:
    async with make_world(tmp_path, limited(tmp_path, key_cache_seconds=60.0)) as world:
        assert (await world.client.get("/v1/me", headers=world.auth("read"))).status_code == 200
        revoke(world, "acme", "read")
        cached = await world.client.get("/v1/me", headers=world.auth("read"))
        assert cached.status_code == 200
        world.app.state.runtime.keys.forget()
        refused = await world.client.get("/v1/me", headers=world.auth("read"))
        assert refused.status_code == 401
        assert refused.json()["error"]["message"].endswith("was revoked")


async def test_a_key_the_tenant_revoked_is_refused_although_the_projection_says_valid(
    world: World,
) -> None:
    """The projection is derived data (and may be restored from before a revocation):
    the tenant's own record decides."""
    revoke(world, "acme", "write")
    response = await world.client.get("/v1/me", headers=world.auth("write"))
    assert response.status_code == 401
    assert response.json()["error"]["message"].endswith("was revoked")
    row = await world.store.key_by_hash(_hash(world.keys["write"]))
    assert row is not None
    assert row.revoked_at is None


async def test_a_key_its_tenant_does_not_hold_is_unknown(world: World) -> None:
    world.ingress.keys["acme"] = [
        k for k in world.ingress.keys["acme"] if k.hash != _hash(world.keys["admin"])
    ]
    response = await world.client.get("/v1/me", headers=world.auth("admin"))
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "unknown API key"


def revoke(world: World, tenant: str, name: str) -> None:
    """What the tenant's `revoke_key` does to its record, without telling the projection."""
    wanted = _hash(world.keys[name])
    held: list[ApiKey] = world.ingress.keys[tenant]
    world.ingress.keys[tenant] = [
        msgspec.structs.replace(k, revoked_at=T0) if k.hash == wanted else k for k in held
    ]


def _hash(plaintext: str) -> str:
    return hash_key(plaintext)


async def test_a_body_that_does_not_arrive_in_time_is_408() -> None:
    reached: list[bool] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(True)

    never = asyncio.Event()
    first = True

    async def receive() -> Message:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"te', "more_body": True}
        await never.wait()
        return {"type": "http.disconnect"}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    limited_app = BodyLimitMiddleware(app, limit=4096, timeout=0.05)
    scope = {"type": "http", "method": "POST", "path": "/v1/specs", "headers": []}
    await limited_app(scope, receive, send)
    assert reached == []
    assert sent[0]["status"] == 408
    body = msgspec.json.decode(sent[1]["body"])
    assert body["error"]["message"] == "the request body did not arrive within 0.05 s"


async def test_reads_that_hold_every_connection_do_not_queue_authentication(
    tmp_path: Path,
) -> None:
    """Every connection of the read pool held by a slow read: a request that needs only
    its key is still answered, and a read waits for a connection."""
    settings = limited(tmp_path, read_connections=2, key_cache_seconds=0.0)
    async with make_world(tmp_path, settings) as world:
        projection = world.app.state.runtime.projection
        release = asyncio.Event()

        async def slow(_store: object) -> None:
            await release.wait()

        held = [asyncio.create_task(projection.read(slow)) for _ in range(2)]
        me = await asyncio.wait_for(
            world.client.get("/v1/me", headers=world.auth("read")), timeout=10
        )
        assert me.status_code == 200
        queued = asyncio.create_task(world.client.get("/v1/agents", headers=world.auth("read")))
        done, _ = await asyncio.wait({queued}, timeout=0.2)
        assert not done
        release.set()
        await asyncio.gather(*held)
        assert (await queued).status_code == 200
