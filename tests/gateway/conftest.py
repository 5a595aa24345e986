"""The gateway in-process: a real SQLite projection in a temporary home, written here as
the projector would, and Restate ingress faked with `httpx.MockTransport`."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import restate
from fastapi import FastAPI

from schemas.chat import ToolCall
from schemas.events import (
    Event,
    EventBody,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
)
from schemas.model import Usage
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, KeyRef, Keys, Offered, PublishedSpec, Scope, SpecVersions
from services.contracts import TENANT, TENANT_KEYS
from services.gateway.app import create_app
from services.keys import new_key
from services.projection.stores import ReadSide, open_store
from services.settings import Settings
from services.tenant.object import latest, next_version, with_key, without_key
from tests.fixtures.postgres import Cluster
from tests.gateway.streaming import StreamingTransport

T0 = datetime(2026, 12, 1, tzinfo=UTC)
LIVE_TOKEN = "live-secret"  # noqa: S105 - a test value
MAX_BODY = 4096
METRICS_TOKEN = "metrics-secret"  # noqa: S105 - a test value


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def turn_bodies(turn: int) -> list[tuple[int, EventBody]]:
    """One calculator turn: ask, call, result, reply, end."""
    call = ToolCall("call_0", "calculator", {"expression": f"{turn}*7"})
    return [
        (1, TurnStarted(f"question {turn}", "helper", 1)),
        (1, ModelMessage("script", "", (call,), Usage(100, 5, 60))),
        (1, ToolCalled("call_0", "calculator", {"expression": f"{turn}*7"})),
        (1, ToolFinished("call_0", "calculator", "ok", str(turn * 7))),
        (2, ModelMessage("script", f"It is {turn * 7}", (), Usage(120, 4, 100))),
        (2, TurnEnded("succeeded", f"It is {turn * 7}")),
    ]


def timeline(agent: str, turns: int, first_seq: int = 1, first_turn: int = 1) -> list[Event]:
    bodies = [(t, r, b) for t in range(first_turn, first_turn + turns) for r, b in turn_bodies(t)]
    return [
        Event(agent, seq, turn, round_, T0 + timedelta(seconds=seq), body)
        for seq, (turn, round_, body) in enumerate(bodies, start=first_seq)
    ]


@dataclass
class FakeIngress:
    """Restate as the gateway uses it: wake sends and the Tenant object through ingress,
    and the Tenant's stored keys through the admin SQL."""

    sent: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    published: dict[tuple[str, str], SpecVersions] = field(default_factory=dict)
    """Each (tenant, kind)'s versions, as the Tenant object keeps them."""
    stops: list[tuple[str, str | None]] = field(default_factory=list)
    deliveries: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    told: list[tuple[str, str, dict[str, Any], str | None]] = field(default_factory=list)
    """Sends to the agent's shared `arrived` and `pause` handlers: (address, handler, body,
    idempotency key)."""
    down: bool = False
    keys: dict[str, list[ApiKey]] = field(default_factory=dict)
    arrivals: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    """Each wake sent, as it arrives: a test that plays the agent waits here."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        parts = request.url.path.strip("/").split("/")
        if parts == ["query"]:
            return self._query(msgspec.json.decode(request.content)["query"])
        return self._ingress(parts, request)

    def _ingress(self, parts: list[str], request: httpx.Request) -> httpx.Response:
        if parts == ["restate", "health"]:
            return httpx.Response(200, json={"services": []})
        if parts[0] == "Agent" and parts[2:] == ["wake", "send"]:
            return self._send(parts[1], request)
        if (
            parts[0] == "Agent"
            and parts[2] in ("stop", "arrived", "pause")
            and parts[3:] == ["send"]
        ):
            return self._told(parts[1], parts[2], request)
        if parts[0] == "Tenant":
            return self._tenant(parts[1], parts[2], request.content)
        if parts[0] == "Hooks":
            return self._hooks(parts[1], parts[2:], request)
        return httpx.Response(404, json={"message": "no such service", "source": "ingress"})

    def _hooks(self, hook: str, handler: list[str], request: httpx.Request) -> httpx.Response:
        """The `Hooks` object: a made hook is answered as it was given; deliveries kept."""
        if handler == ["deliver", "send"]:
            key = request.headers.get("idempotency-key")
            self.deliveries.append((hook, msgspec.json.decode(request.content), key))
            return httpx.Response(200, json={"invocationId": f"inv_hook_{len(self.deliveries)}"})
        if handler == ["create"]:
            return httpx.Response(200, content=request.content)
        return httpx.Response(404, json={"message": "no such handler", "source": "ingress"})

    def _told(self, address: str, handler: str, request: httpx.Request) -> httpx.Response:
        """The shared handlers a one-way control goes to: `stop`, `arrived`, `pause`."""
        if handler == "stop":
            self.stops.append((address, request.headers.get("idempotency-key")))
            return httpx.Response(200, json={"invocationId": f"inv_stop_{len(self.stops)}"})
        body = msgspec.json.decode(request.content)
        self.told.append((address, handler, body, request.headers.get("idempotency-key")))
        return httpx.Response(200, json={"invocationId": f"inv_{handler}_{len(self.told)}"})

    def _send(self, address: str, request: httpx.Request) -> httpx.Response:
        body = msgspec.json.decode(request.content)
        self.sent.append((address, body, request.headers.get("idempotency-key")))
        self.arrivals.put_nowait(body)
        return httpx.Response(200, json={"invocationId": f"inv_{len(self.sent)}"})

    def _tenant(self, tenant: str, handler: str, body: bytes) -> httpx.Response:
        """The Tenant object's own versioning and key handling, without Restate."""
        if handler in ("add_key", "keys", "revoke_key"):
            return self._keys(tenant, handler, body)
        if handler == "offered":
            offered = Offered(models=("script", "smollm2"), tools=("calculator",))
            return httpx.Response(200, content=msgspec.json.encode(offered))
        if handler == "publish":
            spec = msgspec.json.decode(body, type=AgentSpec)
            where = (tenant, spec.kind)
            self.published[where] = next_version(
                self.published.get(where, SpecVersions()), tenant, spec, T0
            )
            published = self.published[where].versions[-1]
            return httpx.Response(200, content=msgspec.json.encode(published))
        kind = msgspec.json.decode(body)["kind"]
        answer = latest(self.published.get((tenant, kind)))
        return httpx.Response(200, content=msgspec.json.encode(answer))

    def _query(self, sql: str) -> httpx.Response:
        """`SELECT value FROM state` of one object's value, as restate-server answers it:
        the bytes the SDK's default serde wrote, hex-encoded."""
        where = dict(re.findall(r"(\w+) = '((?:[^']|'')*)'", sql))
        held = self.keys.get(where["service_key"].replace("''", "'"))
        if (where["service_name"], where["key"]) != (TENANT, TENANT_KEYS.name) or not held:
            return httpx.Response(200, json={"rows": []})
        stored = restate.serde.DefaultSerde(Keys).serialize(Keys(tuple(held)))
        return httpx.Response(200, json={"rows": [{"value": stored.hex()}]})

    def _keys(self, tenant: str, handler: str, body: bytes) -> httpx.Response:
        held = Keys(tuple(self.keys.get(tenant, ())))
        if handler == "add_key":
            try:
                held = with_key(held, tenant, msgspec.json.decode(body, type=ApiKey))
            except restate.TerminalError as error:
                return httpx.Response(error.status_code, json={"message": error.message})
            self.keys[tenant] = list(held.keys)
            return httpx.Response(200, content=body)
        if handler == "keys":
            return httpx.Response(200, content=msgspec.json.encode(held))
        ref = msgspec.json.decode(body, type=KeyRef)
        if not any(key.id == ref.id for key in held.keys):
            return httpx.Response(404, json={"message": f"tenant {tenant} has no key {ref.id!r}"})
        self.keys[tenant] = list(without_key(held, ref, T0).keys)
        revoked = next(key for key in self.keys[tenant] if key.id == ref.id)
        return httpx.Response(200, content=msgspec.json.encode(revoked))


@dataclass
class World:
    app: FastAPI
    client: httpx.AsyncClient
    streams: httpx.AsyncClient
    store: ReadSide
    ingress: FakeIngress
    settings: Settings
    keys: dict[str, str]

    def auth(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[key]}"}

    async def metrics(self) -> httpx.Response:
        """`GET /metrics` with the metrics token."""
        return await self.client.get(
            "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )

    async def record(self, events: Sequence[Event]) -> None:
        """What the projector does when an agent appends events."""
        await self.store.record_events(events)


KEYS: dict[str, tuple[str, Scope]] = {
    "read": ("acme", "read"),
    "write": ("acme", "write"),
    "admin": ("acme", "admin"),
    "revoked": ("acme", "admin"),
    "other": ("other", "admin"),
}


async def seed(store: ReadSide, ingress: FakeIngress | None = None) -> dict[str, str]:
    """The projection's keys, specs and timelines; the keys are the tenants' in `ingress`
    too (the gateway confirms a key with its tenant's record before trusting it)."""
    keys = {}
    for name, (tenant, scope) in KEYS.items():
        plaintext, key = new_key(tenant, scope, T0)
        await store.record_key(key)
        keys[name] = plaintext
        if name == "revoked":
            key = msgspec.structs.replace(key, revoked_at=T0)
            await store.record_key(key)
        if ingress is not None:
            ingress.keys.setdefault(tenant, []).append(key)
    await store.record_spec(PublishedSpec("acme", AgentSpec("helper", "Help.", version=1), T0))
    await store.record_events(timeline("acme.alpha", 2))
    await store.record_events(timeline("other.secret", 1))
    for name in ("beta", "gamma", "delta"):
        await store.record_events(timeline(f"acme.{name}", 1))
    return keys


def settings_for(home: Path, projection_url: str = "") -> Settings:
    """Limits per key off (tests of them set their own): the tests here send many
    requests and open many streams with one key."""
    return Settings(
        home=home,
        projection_url=projection_url,
        max_body_bytes=MAX_BODY,
        live_token=LIVE_TOKEN,
        metrics_token=METRICS_TOKEN,
        key_rate=0,
        key_streams=1000,
    )


@contextlib.asynccontextmanager
async def make_world(
    home: Path, settings: Settings | None = None, **options: Any
) -> AsyncIterator[World]:
    """A seeded projection and a gateway on it (`settings_for(home)` unless `settings`);
    `options` go to `create_app`."""
    settings = settings or settings_for(home)
    ingress = FakeIngress()
    options = {"heartbeat": 0.2, "poll_interval": 0.02, **options}
    async with await open_store(settings.projection_url, home) as store:
        keys = await seed(store, ingress)
        app = create_app(settings, ingress_transport=httpx.MockTransport(ingress), **options)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app), base_url="http://gateway"
            ) as client,
            httpx.AsyncClient(
                transport=StreamingTransport(app), base_url="http://gateway", timeout=10
            ) as streams,
        ):
            yield World(app, client, streams, store, ingress, settings, keys)


@pytest.fixture(params=["sqlite", "postgres"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    """A gateway on a seeded projection: SQLite's file, or a PostgreSQL database."""
    if request.param == "sqlite":
        async with make_world(tmp_path) as world:
            yield world
        return
    server: Cluster = request.getfixturevalue("postgres")
    with server.databases():
        url = server.database()
        async with make_world(tmp_path, settings_for(tmp_path, url)) as world:
            yield world


def unused_key(tenant: str = "acme", scope: Scope = "admin") -> tuple[str, ApiKey]:
    return new_key(tenant, scope, T0)
