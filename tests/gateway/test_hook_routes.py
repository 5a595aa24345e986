"""The webhook routes in-process: what a hook needs, the checks a delivery passes before
Restate holds it (signature, timestamp, size, JSON, rate), and its idempotency key.
Ingress is faked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from standardwebhooks.webhooks import Webhook

from schemas.events import Event, ModelMessage
from schemas.model import Usage
from tests.gateway.conftest import World, make_world, settings_for

pytestmark = pytest.mark.anyio


def now() -> datetime:
    return datetime.now(UTC)  # noqa: TID251 - a sender's clock, not durable code


async def make_hook(world: World, **fields: Any) -> dict[str, Any]:
    body = {"address": "acme.alpha", "template": "Build {{ id }}"} | fields
    response = await world.client.post("/v1/hooks", json=body, headers=world.auth("admin"))
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


def signed(secret: str, webhook_id: str, body: bytes, at: datetime | None = None) -> dict[str, str]:
    at = at or now()
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(webhook_id, at, body.decode()),
    }


async def test_a_hook_is_made_with_its_url_and_secret_and_read_back_without_it(
    world: World,
) -> None:
    made = await make_hook(world)
    assert made["id"].startswith("acme.")
    assert made["url"] == f"http://gateway/hooks/{made['id']}"
    assert made["secret"].startswith("whsec_")
    again = await make_hook(world)
    assert again["secret"] != made["secret"]


@pytest.mark.parametrize(
    ("fields", "status", "words"),
    [
        ({"address": None}, 422, "needs the 'address' of its agent, or a 'kind'"),
        ({"template": "{{ a; import os }}"}, 422, "cannot be read"),
        ({"address": "other.secret"}, 404, "other.secret"),
        ({"address": "acme.nobody"}, 404, "must name a published kind"),
        ({"kind": "nothing"}, 404, "no spec of kind 'nothing'"),
    ],
)
async def test_a_hook_that_cannot_be_made_says_why(
    world: World, fields: dict[str, Any], status: int, words: str
) -> None:
    body = {"address": "acme.alpha", "template": "x"} | fields
    response = await world.client.post("/v1/hooks", json=body, headers=world.auth("admin"))
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]


async def test_a_write_key_cannot_make_a_hook(world: World) -> None:
    response = await world.client.post(
        "/v1/hooks", json={"address": "acme.alpha", "template": "x"}, headers=world.auth("write")
    )
    assert response.status_code == 403


async def test_a_signed_delivery_is_sent_once_per_webhook_id(world: World) -> None:
    hook = await make_hook(world)
    body = msgspec.json.encode({"id": 7})
    response = await world.client.post(
        f"/hooks/{hook['id']}", content=body, headers=signed(hook["secret"], "msg_1", body)
    )
    assert response.status_code == 202, response.text
    assert response.json()["webhook_id"] == "msg_1"
    [(where, delivery, key)] = world.ingress.deliveries
    assert where == hook["id"]
    assert delivery == {"webhook_id": "msg_1", "body": '{"id":7}'}
    assert key == f"webhook {hook['id']} msg_1"


@pytest.mark.parametrize(
    "case", ["another hook's secret", "a changed body", "stale", "not a number"]
)
async def test_a_delivery_that_does_not_verify_is_401_and_never_sent(
    world: World, case: str
) -> None:
    hook, other = await make_hook(world), await make_hook(world)
    body = msgspec.json.encode({"id": 7})
    secret = other["secret"] if case == "another hook's secret" else hook["secret"]
    headers = signed(
        secret, "msg_1", body, now() - timedelta(minutes=6) if case == "stale" else None
    )
    if case == "not a number":
        headers["webhook-timestamp"] = "soon"
    sent = b'{"id": 8}' if case == "a changed body" else body
    response = await world.client.post(f"/hooks/{hook['id']}", content=sent, headers=headers)
    assert response.status_code == 401, response.text
    assert world.ingress.deliveries == []


async def test_a_delivery_too_large_or_not_json_is_refused(tmp_path: Path) -> None:
    settings = settings_for(tmp_path).model_copy(update={"hook_max_bytes": 1024})
    async with make_world(tmp_path, settings) as world:
        hook = await make_hook(world)
        bodies = ((b"[" + b"1," * 600 + b"1]", 413), (b"not json", 400), (b"[" * 1000, 400))
        for body, status in bodies:
            headers = signed(hook["secret"], "m", body)
            response = await world.client.post(
                f"/hooks/{hook['id']}", content=body, headers=headers
            )
            assert response.status_code == status, response.text
            assert "Error" not in response.json()["error"]["message"]
        assert world.ingress.deliveries == []


async def test_a_hook_delivering_past_its_rate_is_429_with_retry_after(tmp_path: Path) -> None:
    settings = settings_for(tmp_path).model_copy(update={"hook_rate": 0.5, "hook_burst": 2})
    async with make_world(tmp_path, settings) as world:
        hook = await make_hook(world)
        answers = []
        for n in range(3):
            body = msgspec.json.encode({"id": n})
            headers = signed(hook["secret"], f"m{n}", body)
            answers.append(
                await world.client.post(f"/hooks/{hook['id']}", content=body, headers=headers)
            )
        assert [a.status_code for a in answers] == [202, 202, 429]
        assert answers[2].headers["Retry-After"] == "2"
        assert f"Hook {hook['id']} sent more than" in answers[2].json()["error"]["message"]


async def test_a_delivery_once_the_tenants_tokens_are_used_is_429_to_retry_tomorrow(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path).model_copy(update={"tenant_daily_tokens": 100})
    async with make_world(tmp_path, settings) as world:
        hook = await make_hook(world)
        used = ModelMessage("script", "busy day", usage=Usage(150, 5, 0))
        await world.record([Event("acme.alpha", 13, 3, 1, now(), used)])
        body = msgspec.json.encode({"id": 1})
        headers = signed(hook["secret"], "m1", body)
        response = await world.client.post(f"/hooks/{hook['id']}", content=body, headers=headers)
        assert response.status_code == 429, response.text
        assert int(response.headers["Retry-After"]) >= 1
        assert world.ingress.deliveries == []


async def test_a_webhook_id_outside_printable_ascii_is_401_and_never_sent(world: World) -> None:
    hook = await make_hook(world)
    body = msgspec.json.encode({"id": 7})
    headers = signed(hook["secret"], "msg_1", body)
    sent = [
        (name.encode(), value.encode()) for name, value in headers.items() if name != "webhook-id"
    ]
    sent.append((b"webhook-id", "msg_\u00e9".encode()))
    response = await world.client.post(f"/hooks/{hook['id']}", content=body, headers=sent)
    assert response.status_code == 401
    assert "printable ASCII" in response.json()["error"]["message"]
    assert world.ingress.deliveries == []
