"""Keys: 401 without a valid one, 403 beyond its scope, 404 for another tenant's agents."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from services.keys import new_key
from services.settings import Settings
from tests.gateway.conftest import T0, World, make_world, unused_key

OLD = "https://old.example.com"
NEW = "https://new.example.com"

pytestmark = pytest.mark.anyio

ROUTES = [
    ("GET", "/v1/agents/{a}"),
    ("GET", "/v1/agents/{a}/timeline"),
    ("GET", "/v1/agents/{a}/events"),
    ("POST", "/v1/agents/{a}/messages"),
]
ALL = [*ROUTES, ("GET", "/v1/agents"), ("GET", "/v1/specs"), ("POST", "/v1/specs")]
MESSAGE = {"text": "hello", "kind": "helper"}


async def call(
    world: World, method: str, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    body = MESSAGE if method == "POST" else None
    response = await world.client.request(method, path, headers=headers, json=body)
    return response.status_code, response.json()


@pytest.mark.parametrize(("method", "path"), ALL)
@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "missing API key"),
        ("Bearer", "malformed"),
        ("Basic dXNlcjpwYXNz", "malformed"),
        ("Bearer tsk_short_x", "malformed"),
        ("Bearer " + unused_key()[0], "unknown API key"),
    ],
)
async def test_no_valid_key_is_401_with_a_sentence(
    world: World, method: str, path: str, header: str | None, says: str
) -> None:
    headers = {"Authorization": header} if header else {}
    status, body = await call(world, method, path.format(a="acme.alpha"), headers)
    assert status == 401
    assert body["error"]["status"] == 401
    assert says in body["error"]["message"]


@pytest.mark.parametrize(("method", "path"), ALL)
async def test_a_revoked_key_is_401(world: World, method: str, path: str) -> None:
    status, body = await call(world, method, path.format(a="acme.alpha"), world.auth("revoked"))
    assert status == 401
    assert "revoked" in body["error"]["message"]


async def test_a_missing_key_is_challenged(world: World) -> None:
    response = await world.client.get("/v1/agents")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("key", "method", "path", "status"),
    [
        ("read", "POST", "/v1/agents/acme.alpha/messages", 403),
        ("read", "POST", "/v1/specs", 403),
        ("write", "POST", "/v1/specs", 403),
        ("write", "POST", "/v1/agents/acme.alpha/messages", 202),
        ("read", "GET", "/v1/agents/acme.alpha", 200),
    ],
)
async def test_scopes(world: World, key: str, method: str, path: str, status: int) -> None:
    body = MESSAGE if path.endswith("messages") else {"kind": "x", "instructions": "y"}
    response = await world.client.request(
        method, path, headers=world.auth(key), json=body if method == "POST" else None
    )
    assert response.status_code == status, response.text
    if status == 403:
        needed = "an admin" if path == "/v1/specs" else "a write"
        message = response.json()["error"]["message"]
        assert message == f"this route needs {needed} key; this key is {key}"


@pytest.mark.parametrize("scope", ["read", "admin"])
@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_another_tenants_agent_is_answered_like_one_that_does_not_exist(
    world: World, method: str, path: str, scope: str
) -> None:
    """`other.secret` exists; to an acme key of any scope it is exactly as absent as
    `other.nobody`: not even a 403 tells that it is there. The words say which addresses
    the key reaches (what a typo in the tenant needs), nothing of the other tenant."""
    answers = []
    for address in ("other.secret", "other.nobody"):
        status, body = await call(world, method, path.format(a=address), world.auth(scope))
        answers.append((status, body["error"]["message"].replace(address, "<address>")))
    assert answers[0] == answers[1]
    assert answers[0] == (
        404,
        "there is no agent <address> for this key: it is a key of tenant acme, and reaches "
        "only addresses that start with 'acme.'",
    )
    status, body = await call(world, "GET", "/v1/agents/acme.nobody", world.auth(scope))
    assert status == 404
    assert world.ingress.sent == []


async def test_a_list_shows_only_the_keys_tenant(world: World) -> None:
    acme = await world.client.get("/v1/agents", headers=world.auth("read"))
    other = await world.client.get("/v1/agents", headers=world.auth("other"))
    assert {a["address"].split(".")[0] for a in acme.json()["agents"]} == {"acme"}
    assert [a["address"] for a in other.json()["agents"]] == ["other.secret"]


async def test_health_needs_no_key_and_metrics_need_the_metrics_token(world: World) -> None:
    assert (await world.client.get("/v1/health")).status_code == 200
    bare = await world.client.get("/metrics")
    assert bare.status_code == 401
    assert bare.json()["error"]["message"].startswith("missing or wrong Authorization")
    api_key = await world.client.get("/metrics", headers=world.auth("admin"))
    assert api_key.status_code == 401
    scraped = await world.metrics()
    assert scraped.status_code == 200
    assert "teaspill_turns_total" in scraped.text


async def test_metrics_name_no_tenant_agent_or_key(world: World) -> None:
    lines = (await world.metrics()).text.splitlines()
    text = "\n".join(line for line in lines if not line.startswith("#"))
    for secret in ("acme", "other", "alpha", *(key.split("_")[1] for key in world.keys.values())):
        assert secret not in text
    labels = set(re.findall(r'\{(\w+)="', text))
    assert labels <= {"outcome", "kind", "status", "model"}


async def test_metrics_are_off_without_a_metrics_token(tmp_path: Path) -> None:
    async with make_world(tmp_path, settings=Settings(home=tmp_path)) as world:
        response = await world.client.get("/metrics", headers={"Authorization": "Bearer x"})
        assert response.status_code == 403
        assert "TEASPILL_METRICS_TOKEN" in response.json()["error"]["message"]


async def test_a_new_publishable_keys_origin_is_answered_at_once(tmp_path: Path) -> None:
    """The origins publishable keys list are cached; one they do not hold is read again,
    so a key made just before a page's first preflight is answered."""
    ask = {"Access-Control-Request-Method": "POST"}
    async with make_world(tmp_path) as world:
        before = await world.client.options("/v1/me", headers={"Origin": OLD, **ask})
        assert before.status_code == 403  # the origins are read, and cached, now
        _, key = new_key("acme", "publishable", T0, origins=(NEW,), kinds=("helper",))
        await world.store.record_key(key)
        first = await world.client.options("/v1/me", headers={"Origin": NEW, **ask})
        assert first.status_code == 204, first.text
        assert first.headers["access-control-allow-origin"] == NEW
        again = await world.client.options("/v1/me", headers={"Origin": OLD, **ask})
        assert again.status_code == 403
        assert "access-control-allow-origin" not in again.headers


async def test_a_refusal_before_the_body_is_read_closes_the_connection(world: World) -> None:
    """A client must not send its next request on a connection whose last body the
    gateway never read; an answer that left none unread keeps it open."""
    path = "/v1/agents/acme.alpha/messages"
    refused = await world.client.post(path, json={"text": "hi"}, headers=world.auth("revoked"))
    assert refused.status_code == 401
    assert refused.headers.get("connection") == "close"
    bodiless = await world.client.get("/v1/agents", headers=world.auth("revoked"))
    assert bodiless.status_code == 401
    assert "connection" not in bodiless.headers
    too_big = await world.client.post(
        path, content=b"x" * (world.settings.max_body_bytes + 1), headers=world.auth("write")
    )
    assert too_big.status_code == 413
    assert too_big.headers.get("connection") == "close"
