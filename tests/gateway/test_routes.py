"""The routes against a real projection: what they answer, byte for byte where it matters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.events import Event, TimelinePage, ToolFinished, TurnEnded
from schemas.spec import AgentSpec
from schemas.tenant import PublishedSpec, SpecVersions
from services.gateway.app import create_app
from services.projection.postgres import PostgresStore
from services.projection.store import ProjectionStore
from services.settings import Settings
from tests.gateway.conftest import T0, FakeIngress, World, seed, settings_for, timeline

pytestmark = pytest.mark.anyio


async def test_a_message_to_an_agent_goes_one_way_through_ingress(world: World) -> None:
    response = await world.client.post(
        "/v1/agents/acme.alpha/messages",
        json={"text": "hello"},
        headers={**world.auth("write"), "Idempotency-Key": "req-1"},
    )
    assert response.status_code == 202
    answer = response.json()
    assert answer == {
        "address": "acme.alpha",
        "invocation_id": "inv_1",
        "after_seq": 12,
        "events_url": "/v1/agents/acme.alpha/events?after=12",
        "message_id": answer["message_id"],
    }
    address, body, key = world.ingress.sent[0]
    assert (address, key) == ("acme.alpha", "req-1")
    assert (body["wake"]["text"], body["wake"]["id"]) == ("hello", answer["message_id"])
    again = await world.client.post(
        "/v1/agents/acme.alpha/messages",
        json={"text": "hello"},
        headers={**world.auth("write"), "Idempotency-Key": "req-1"},
    )
    assert again.json()["message_id"] == answer["message_id"]


async def test_an_idempotency_key_outside_printable_ascii_is_a_422_and_nothing_is_sent(
    world: World,
) -> None:
    response = await world.client.post(
        "/v1/agents/acme.alpha/messages",
        json={"text": "hello"},
        headers=[
            *((name.encode(), value.encode()) for name, value in world.auth("write").items()),
            (b"Idempotency-Key", "caf\u00e9".encode()),
        ],
    )
    assert response.status_code == 422
    assert "Idempotency-Key" in response.json()["error"]["message"]
    assert world.ingress.sent == []


async def test_a_new_agent_is_created_from_a_published_kind_and_can_be_followed(
    world: World,
) -> None:
    response = await world.client.post(
        "/v1/agents/acme.fresh/messages",
        json={"text": "hi", "kind": "helper"},
        headers=world.auth("write"),
    )
    assert response.status_code == 202
    assert response.json()["after_seq"] == 0
    assert world.ingress.sent[0][1]["wake"]["kind"] == "helper"
    page = await world.client.get("/v1/agents/acme.fresh/timeline", headers=world.auth("read"))
    assert page.json() == {"events": [], "last_seq": 0}
    again = await world.client.post(
        "/v1/agents/acme.fresh/messages", json={"text": "more"}, headers=world.auth("write")
    )
    assert again.status_code == 202


async def test_a_kind_published_a_moment_ago_is_found_through_ingress(world: World) -> None:
    published = await world.client.post(
        "/v1/specs",
        json={"kind": "newkind", "instructions": "Be new.", "tools": ["calculator"]},
        headers=world.auth("admin"),
    )
    assert published.status_code == 201
    spec = msgspec.json.decode(published.content, type=PublishedSpec)
    assert (spec.tenant, spec.spec.kind, spec.spec.version) == ("acme", "newkind", 1)
    assert spec.spec.tools == ("calculator",)
    # The projection has not seen it; the Tenant object has.
    sent = await world.client.post(
        "/v1/agents/acme.novel/messages",
        json={"text": "hi", "kind": "newkind"},
        headers=world.auth("write"),
    )
    assert sent.status_code == 202


async def test_specs_are_listed_from_the_projection(world: World) -> None:
    await world.store.record_spec(
        PublishedSpec("acme", AgentSpec("helper", "Help more.", version=2), T0)
    )
    await world.store.record_spec(PublishedSpec("other", AgentSpec("helper", "x", version=1), T0))
    response = await world.client.get("/v1/specs?kind=helper", headers=world.auth("read"))
    versions = msgspec.json.decode(response.content, type=SpecVersions).versions
    assert [(v.tenant, v.spec.version) for v in versions] == [("acme", 1), ("acme", 2)]
    none = await world.client.get("/v1/specs?kind=absent", headers=world.auth("read"))
    assert none.json() == {"versions": []}


async def test_an_agent_row(world: World) -> None:
    response = await world.client.get("/v1/agents/acme.alpha", headers=world.auth("read"))
    assert response.json() == {
        "address": "acme.alpha",
        "kind": "helper",
        "spec_version": 1,
        "status": "idle",
        "turn": 2,
        "last_seq": 12,
        "last_outcome": "succeeded",
        "last_activity": (T0.replace(second=12)).isoformat(),
        "queued": 0,
    }


async def test_agents_are_paginated_by_address(world: World) -> None:
    seen: list[str] = []
    cursor: str | None = ""
    pages = 0
    while cursor is not None:
        response = await world.client.get(
            f"/v1/agents?limit=2&after={cursor}", headers=world.auth("read")
        )
        body = response.json()
        seen += [agent["address"] for agent in body["agents"]]
        cursor = body["next"]
        pages += 1
    assert seen == ["acme.alpha", "acme.beta", "acme.delta", "acme.gamma"]
    assert pages == 2
    filtered = await world.client.get(
        "/v1/agents?kind=helper&status=idle&limit=200", headers=world.auth("read")
    )
    assert len(filtered.json()["agents"]) == 4
    assert filtered.json()["next"] is None
    running = await world.client.get("/v1/agents?status=running", headers=world.auth("read"))
    assert running.json() == {"agents": [], "next": None}


@pytest.mark.parametrize(("after", "limit"), [(0, 100), (0, 5), (7, 3), (12, 10), (40, 1)])
async def test_a_timeline_page_is_the_projection_encoded_as_is(
    world: World, after: int, limit: int
) -> None:
    response = await world.client.get(
        f"/v1/agents/acme.alpha/timeline?after={after}&limit={limit}", headers=world.auth("read")
    )
    expected = await world.store.timeline("acme.alpha", after, limit)
    assert response.content == msgspec.json.encode(TimelinePage(tuple(expected), 12))
    page = msgspec.json.decode(response.content, type=TimelinePage)
    assert [e.seq for e in page.events] == list(range(after + 1, min(after + limit, 12) + 1))


async def test_metrics_count_from_the_projection(world: World) -> None:
    text = (await world.metrics()).text
    # acme.alpha 2 turns, other.secret 1, beta/gamma/delta 1 each: 6 turns, 12 rounds.
    assert 'teaspill_turns_total{outcome="succeeded"} 6' in text
    assert 'teaspill_turns_total{outcome="failed"} 0' in text
    assert "teaspill_rounds_total 12" in text
    assert 'teaspill_model_tokens_total{kind="prompt"} 1320' in text
    assert 'teaspill_model_tokens_total{kind="completion"} 54' in text
    assert 'teaspill_model_tokens_total{kind="cached"} 960' in text
    assert f"teaspill_prompt_cache_reuse_ratio {960 / 1320!r}" in text
    assert "teaspill_errors_total 0" in text
    assert 'teaspill_agents{status="idle"} 5' in text
    for status in ("running", "waiting", "parked", "paused", "archived"):
        assert f'teaspill_agents{{status="{status}"}} 0' in text
    assert "# TYPE teaspill_turns_total counter" in text


async def test_metrics_count_failed_turns_and_tool_errors(world: World) -> None:
    await world.record(
        [
            Event("acme.beta", 7, 2, 1, T0, ToolFinished("c", "calculator", "error", "bad")),
            Event("acme.beta", 8, 2, 1, T0, TurnEnded("failed", reason="It broke.")),
        ]
    )
    text = (await world.metrics()).text
    assert "teaspill_errors_total 2" in text
    assert 'teaspill_turns_total{outcome="failed"} 1' in text


async def test_health_names_the_part_that_is_down(world: World) -> None:
    assert (await world.client.get("/v1/health")).json() == {"status": "ok"}
    world.ingress.down = True
    response = await world.client.get("/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert body["parts"]["projection"] == "ok"
    assert "not reachable" in body["parts"]["ingress"]
    assert "ingress" in body["error"]["message"]


async def test_ingress_down_is_a_503_sentence_on_send(world: World) -> None:
    assert (await world.client.get("/v1/me", headers=world.auth("write"))).status_code == 200
    world.ingress.down = True
    response = await world.client.post(
        "/v1/agents/acme.alpha/messages", json={"text": "hi"}, headers=world.auth("write")
    )
    assert response.status_code == 503
    assert "Restate ingress" in response.json()["error"]["message"]
    unconfirmed = await world.client.get("/v1/agents", headers=world.auth("read"))
    assert unconfirmed.status_code == 503
    assert unconfirmed.json()["error"]["message"] == (
        "the API key cannot be checked right now (Restate does not answer); retry soon"
    )


async def test_a_gateway_started_before_the_projection_exists_waits_for_it(
    tmp_path: Path,
) -> None:
    ingress = FakeIngress()
    app = create_app(settings_for(tmp_path), ingress_transport=httpx.MockTransport(ingress))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client,
    ):
        early = await client.get("/v1/health")
        assert early.status_code == 503
        assert "does not exist yet" in early.json()["parts"]["projection"]
        anyone = await client.get(
            "/v1/agents", headers={"Authorization": "Bearer tsk_" + "a" * 12 + "_" + "b" * 40}
        )
        assert anyone.status_code == 503
        async with await ProjectionStore.open(tmp_path / "projection.db") as store:
            keys = await seed(store, ingress)
            late = await client.get(
                "/v1/agents", headers={"Authorization": f"Bearer {keys['read']}"}
            )
            assert late.status_code == 200


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)
async def test_a_rebuilt_projection_is_read_again(world: World, tmp_path: Path) -> None:
    assert (await world.client.get("/v1/agents", headers=world.auth("read"))).status_code == 200
    await world.store.close()
    remove_projection(tmp_path / "projection.db")
    async with await ProjectionStore.open(tmp_path / "projection.db") as store:
        keys = await seed(store, world.ingress)
        await store.record_events(timeline("acme.rebuilt", 1))
        world.keys = keys
        # The gateway checks for a replaced file twice a second: wait for it to notice.
        deadline = asyncio.get_running_loop().time() + 5.0
        while True:
            response = await world.client.get("/v1/agents/acme.rebuilt", headers=world.auth("read"))
            if response.status_code == 200 or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("world", ["postgres"], indirect=True)
async def test_a_rebuilt_shared_projection_is_read_at_once(world: World) -> None:
    """On PostgreSQL a rebuild empties the tables and fills them again under the readers."""
    assert isinstance(world.store, PostgresStore)
    await world.store.clear()
    assert await world.store.agent("acme.alpha") is None
    world.keys = await seed(world.store, world.ingress)
    await world.store.record_events(timeline("acme.rebuilt", 1))
    response = await world.client.get("/v1/agents/acme.rebuilt", headers=world.auth("read"))
    assert response.status_code == 200, response.text


def remove_projection(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def test_live_deltas_are_refused_when_no_token_is_set(tmp_path: Path) -> None:
    app = create_app(Settings(home=tmp_path))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client,
    ):
        response = await client.post(
            "/internal/live", json={"deltas": []}, headers={"X-Teaspill-Live-Token": ""}
        )
        assert response.status_code == 403
        assert "switched off" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "tools", [["calculator"], {"calculator": "allow", "shell": "ask", "post_note": "deny"}]
)
async def test_a_spec_is_published_as_agents_run_it(world: World, tools: object) -> None:
    body = {"kind": "policy", "instructions": "x", "tools": tools, "limits": {"max_rounds": 3}}
    response = await world.client.post("/v1/specs", json=body, headers=world.auth("admin"))
    assert response.status_code == 201, response.text
    spec = world.ingress.published[("acme", "policy")].versions[0].spec
    assert spec == msgspec.convert({**body, "version": 1}, AgentSpec)


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
async def test_no_documentation_page_loads_from_another_host(world: World, path: str) -> None:
    """FastAPI's Swagger UI and ReDoc pull their scripts from a CDN: they are switched off,
    and the description they would show is served as JSON."""
    assert (await world.client.get(path)).status_code == 404
    described = await world.client.get("/openapi.json")
    assert described.status_code == 200
    assert described.json()["info"]["title"] == "teaspill gateway"
