"""Webhooks on a real stack (restate-server, the endpoint, the gateway): a signed delivery
runs one turn, a `webhook-id` delivered again runs nothing more, a wrong signature or
timestamp is 401, and a delivery while the endpoint is down is held and runs after."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec
import pytest
from standardwebhooks.webhooks import Webhook

from schemas.events import TurnEnded, TurnStarted
from tests.durable.conftest import eventually
from tests.gateway.test_stack import GatewayStack, gateway_stack

pytestmark = pytest.mark.durable


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("hooks-home")) as stack:
        yield stack


def now() -> datetime:
    return datetime.now(UTC)  # noqa: TID251 - a sender's clock, not durable code


def make_hook(gw: GatewayStack, **fields: Any) -> dict[str, Any]:
    response = gw.http.post("/v1/hooks", json=fields, headers=gw.auth)
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    assert made["secret"].startswith("whsec_")
    return made


def signed(
    secret: str, webhook_id: str, payload: dict[str, Any], at: datetime | None = None
) -> tuple[bytes, dict[str, str]]:
    body = msgspec.json.encode(payload)
    at = at or now()
    signature = Webhook(secret).sign(webhook_id, at, body.decode())
    headers = {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
    }
    return body, headers


def deliver(
    gw: GatewayStack, hook: dict[str, Any], webhook_id: str, payload: dict[str, Any]
) -> httpx.Response:
    body, headers = signed(hook["secret"], webhook_id, payload)
    return gw.http.post(f"/hooks/{hook['id']}", content=body, headers=headers)


def turns_of(gw: GatewayStack, address: str, text: str) -> list[int]:
    return [
        e.turn
        for e in gw.timeline(address)
        if isinstance(e.body, TurnStarted) and e.body.text == text
    ]


def wait_for_reply(gw: GatewayStack, address: str, text: str) -> None:
    def ended() -> bool | None:
        events = gw.timeline(address)
        turns = {e.turn for e in events if isinstance(e.body, TurnStarted) and e.body.text == text}
        done = [e for e in events if e.turn in turns and isinstance(e.body, TurnEnded)]
        return True if done else None

    eventually(ended, 120.0, f"the turn of {text!r} to end")


@pytest.fixture
def agent(gw: GatewayStack, request: pytest.FixtureRequest) -> str:
    address = f"acme.hooked-{abs(hash(request.node.name)) % 10**8}"
    gw.send(address, "hello")
    gw.wait_for(address, "turn_ended")
    return address


def test_a_signed_delivery_runs_one_turn_and_its_id_again_runs_nothing(
    gw: GatewayStack, agent: str
) -> None:
    hook = make_hook(gw, address=agent, template="Build {{ build.id }} is {{ status }}.")
    assert hook["url"].endswith(f"/hooks/{hook['id']}")
    payload = {"build": {"id": 7}, "status": "red"}

    first = deliver(gw, hook, "msg_1", payload)
    assert first.status_code == 202, first.text
    wait_for_reply(gw, agent, "Build 7 is red.")

    again = deliver(gw, hook, "msg_1", payload)
    assert again.status_code == 202, again.text
    assert again.json()["invocation_id"] == first.json()["invocation_id"]
    deliver(gw, hook, "msg_2", {"build": {"id": 8}, "status": "green"})
    wait_for_reply(gw, agent, "Build 8 is green.")

    assert len(turns_of(gw, agent, "Build 7 is red.")) == 1
    ended = [e.body for e in gw.timeline(agent) if isinstance(e.body, TurnEnded)]
    assert ended[-1].reply == "You said: Build 8 is green."


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("wrong signature", "does not match this hook's secret"),
        ("stale timestamp", "s in the past"),
        ("future timestamp", "s in the future"),
        ("no signature", "needs the headers"),
    ],
)
def test_a_delivery_with_a_wrong_signature_or_timestamp_is_401(
    gw: GatewayStack, agent: str, case: str, words: str
) -> None:
    hook = make_hook(gw, address=agent, template="{{ . }}")
    at = {
        "stale timestamp": now() - timedelta(minutes=10),
        "future timestamp": now() + timedelta(minutes=10),
    }.get(case)
    secret = "whsec_" + "QUJD" * 8 if case == "wrong signature" else hook["secret"]
    body, headers = signed(secret, "msg_bad", {"x": 1}, at)
    if case == "no signature":
        del headers["webhook-signature"]
    response = gw.http.post(f"/hooks/{hook['id']}", content=body, headers=headers)
    assert response.status_code == 401, response.text
    message = response.json()["error"]["message"]
    assert words in message
    assert "Error" not in message


def test_a_delivery_while_the_endpoint_is_down_is_held_and_runs_after(
    gw: GatewayStack, agent: str
) -> None:
    hook = make_hook(gw, address=agent, template="Deploy {{ version }} finished.")
    gw.endpoint.kill()
    try:
        started = time.monotonic()
        response = deliver(gw, hook, "msg_down", {"version": "1.2.3"})
        answered = time.monotonic() - started
    finally:
        gw.endpoint.start()
    assert response.status_code == 202, response.text
    assert answered < 5.0
    wait_for_reply(gw, agent, "Deploy 1.2.3 finished.")
    assert len(turns_of(gw, agent, "Deploy 1.2.3 finished.")) == 1


def test_a_delivery_to_a_hook_a_restarted_gateway_never_saw_is_held_while_the_endpoint_is_down(
    gw: GatewayStack, agent: str
) -> None:
    """The new gateway cannot ask the hook's object whether it is aimed at one agent: it
    takes the delivery while the tenant has room for one more agent."""
    hook = make_hook(gw, address=agent, template="Release {{ version }} is out.")
    gw.endpoint.kill()
    try:
        gw.gateway.stop()
        gw.gateway.start()
        response = deliver(gw, hook, "msg_unseen", {"version": "2.0"})
    finally:
        gw.endpoint.start()
    assert response.status_code == 202, response.text
    wait_for_reply(gw, agent, "Release 2.0 is out.")
    assert len(turns_of(gw, agent, "Release 2.0 is out.")) == 1


def test_a_tenants_hooks_are_listed_without_secrets_until_removed(
    gw: GatewayStack, agent: str
) -> None:
    made = make_hook(gw, address=agent, template="listed {{ . }}")
    listed = gw.http.get("/v1/hooks", headers=gw.auth)
    assert listed.status_code == 200, listed.text
    shown = {h["id"]: h for h in listed.json()["hooks"]}
    assert shown[made["id"]]["template"] == "listed {{ . }}"
    assert "secret" not in shown[made["id"]]
    removed = gw.http.delete(f"/v1/hooks/{made['id']}", headers=gw.auth)
    assert removed.status_code == 200, removed.text
    after = gw.http.get("/v1/hooks", headers=gw.auth).json()["hooks"]
    assert made["id"] not in {h["id"] for h in after}
    assert gw.http.get(f"/v1/hooks/{made['id']}", headers=gw.auth).status_code == 404


def test_a_hook_for_a_kind_starts_a_new_agent_per_delivery(gw: GatewayStack) -> None:
    hook = make_hook(gw, kind="calc", template="New ticket: {{ ticket.title }}")
    response = deliver(gw, hook, "ticket-41", {"ticket": {"title": "Printer on fire"}})
    assert response.status_code == 202, response.text
    digest = hashlib.sha256(f"{hook['id']}\nticket-41".encode()).hexdigest()[:12]
    address = f"acme.hook-{hook['id'].split('.')[1]}-{digest}"
    wait_for_reply(gw, address, "New ticket: Printer on fire")


def test_a_schedule_or_a_hook_made_again_with_its_idempotency_key_is_the_same_one(
    gw: GatewayStack, agent: str
) -> None:
    retry = gw.auth | {"Idempotency-Key": "setup-42"}
    schedule = {"text": "Check the build.", "every": "1h"}
    route = f"/v1/agents/{agent}/schedules"
    first, again = (gw.http.post(route, json=schedule, headers=retry) for _ in range(2))
    assert first.status_code == again.status_code == 201, again.text
    assert first.json()["id"] == again.json()["id"]
    assert len(gw.http.get(route, headers=gw.auth).json()["schedules"]) == 1

    hook = {"address": agent, "template": "x"}
    made, remade = (gw.http.post("/v1/hooks", json=hook, headers=retry) for _ in range(2))
    assert made.status_code == remade.status_code == 201, remade.text
    assert made.json()["id"] == remade.json()["id"]
    assert made.json()["secret"] == remade.json()["secret"]
    listed = gw.http.get("/v1/hooks", headers=gw.auth).json()["hooks"]
    assert [h["id"] for h in listed].count(made.json()["id"]) == 1
