"""A person's input is never lost or kept waiting while the service endpoint restarts:
approvals, stops and messages sent through the gateway with the endpoint SIGKILLed are
answered 202 at once and applied exactly once after the restart, with no client retry.
A real restate-server, endpoint and gateway, each a child process."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from schemas.events import (
    ApprovalAnswered,
    ApprovalRefused,
    ApprovalRequested,
    Event,
    StopRefused,
    ToolFinished,
    TurnEnded,
    TurnStarted,
)
from services.executor.scripted import script
from tests.fixtures.tools import ledger_path
from tests.gateway.test_stack import CALCULATE, GatewayStack, admin_key, gateway_stack

pytestmark = pytest.mark.durable

CAREFUL = {
    "kind": "careful",
    "instructions": "Follow the script.",
    "model": "script",
    "tools": {"ledger": "ask", "calculator": "allow"},
}
LEDGER = script(
    {"calls": [{"name": "ledger", "arguments": {"entry": "approved-entry"}}]},
    {"reply": "wrote: {results}"},
)
SLOW = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]},
    {"sleep": 60, "reply": "never"},
)
"""A calculator round, then a model step that runs for a minute unless it is stopped."""


def post(gw: GatewayStack, path: str, body: Any = None, key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key or gw.key}"}
    return gw.http.post(path, json=body, headers=headers)


def timed(gw: GatewayStack, path: str, body: Any = None) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = post(gw, path, body)
    return response, time.monotonic() - started


def waiting_for_approval(gw: GatewayStack, address: str) -> str:
    """Start a turn that asks to write the ledger; return its request id."""
    sent = post(gw, f"/v1/agents/{address}/messages", {"text": LEDGER, "kind": "careful"})
    assert sent.status_code == 202, sent.text
    events = gw.wait_for(address, "approval_requested")
    return next(e.body.request_id for e in events if isinstance(e.body, ApprovalRequested))


def bodies(events: list[Event], kind: type) -> list[Any]:
    return [e.body for e in events if isinstance(e.body, kind)]


def ledger(gw: GatewayStack, address: str) -> Counter[str]:
    path = ledger_path(gw.settings.home)
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split("\t")[1] for line in lines if line.startswith(f"{address}/"))


@pytest.fixture(scope="module")
def careful(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    """A stack of its own (its endpoint is killed), with a spec whose ledger tool asks."""
    with gateway_stack(tmp_path_factory.mktemp("chaos-home")) as gw:
        published = post(gw, "/v1/specs", CAREFUL)
        assert published.status_code == 201, published.text
        yield gw


def test_with_the_endpoint_killed_each_input_is_202_at_once_and_applied_once_after(
    careful: GatewayStack,
) -> None:
    gw = careful
    request = waiting_for_approval(gw, "acme.chaos-approve")
    waiting_for_approval(gw, "acme.chaos-stop")
    gw.send("acme.chaos-message", CALCULATE)
    gw.wait_for("acme.chaos-message", "turn_ended")

    gw.endpoint.kill()
    answers = [
        timed(gw, f"/v1/agents/acme.chaos-approve/approvals/{request}", {"approve": True}),
        timed(gw, "/v1/agents/acme.chaos-stop/stop"),
        timed(gw, "/v1/agents/acme.chaos-message/messages", {"text": CALCULATE}),
    ]
    for response, seconds in answers:
        assert response.status_code == 202, response.text
        assert seconds < 1.0, f"{response.request.url} took {seconds:.2f} s"
    gw.endpoint.start()

    approved = wait_for_end(gw, "acme.chaos-approve", 1)
    assert approved.outcome == "succeeded"
    assert approved.reply == "wrote: recorded approved-entry"
    assert ledger(gw, "acme.chaos-approve") == Counter({"approved-entry": 1})
    assert len(bodies(gw.timeline("acme.chaos-approve"), ApprovalAnswered)) == 1

    stopped = wait_for_end(gw, "acme.chaos-stop", 1)
    assert stopped.outcome == "stopped"
    assert ledger(gw, "acme.chaos-stop") == Counter()

    second = wait_for_end(gw, "acme.chaos-message", 2)
    assert (second.outcome, second.reply) == ("succeeded", "It is 42")
    events = gw.timeline("acme.chaos-message")
    assert [e.turn for e in events if isinstance(e.body, TurnStarted)] == [1, 2]
    assert len(bodies(events, ToolFinished)) == 2


def test_a_one_way_stop_ends_a_running_turn_within_seconds(careful: GatewayStack) -> None:
    gw = careful
    address = "acme.chaos-running"
    sent = post(gw, f"/v1/agents/{address}/messages", {"text": SLOW, "kind": "careful"})
    assert sent.status_code == 202, sent.text
    gw.wait_for(address, "tool_finished")  # the second round's model step follows at once
    response, seconds = timed(gw, f"/v1/agents/{address}/stop")
    assert response.status_code == 202
    assert seconds < 1.0
    started = time.monotonic()
    assert wait_for_end(gw, address, 1, timeout=10).outcome == "stopped"
    assert time.monotonic() - started < 10

    idle, _ = timed(gw, f"/v1/agents/{address}/stop")
    assert idle.status_code == 202
    refused = gw.wait_for(address, "stop_refused")
    assert "nothing to stop" in bodies(refused, StopRefused)[0].message


def test_two_answers_at_the_same_instant_run_the_tool_once_and_say_which_applied(
    careful: GatewayStack,
) -> None:
    gw = careful
    address = "acme.chaos-race"
    request = waiting_for_approval(gw, address)
    keys = [gw.key, admin_key(gw.settings, gw.http)]
    start = threading.Barrier(len(keys))
    statuses: list[int] = []

    def answer(key: str) -> None:
        start.wait()
        path = f"/v1/agents/{address}/approvals/{request}"
        statuses.append(post(gw, path, {"approve": True}, key).status_code)

    threads = [threading.Thread(target=answer, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert wait_for_end(gw, address, 1).outcome == "succeeded"
    assert ledger(gw, address) == Counter({"approved-entry": 1})
    assert sorted(statuses) in ([202, 202], [202, 409])
    events = gw.timeline(address)
    applied = bodies(events, ApprovalAnswered)
    assert len(applied) == 1
    key_ids = {key.split("_")[1] for key in keys}
    assert applied[0].by in key_ids
    if statuses == [202, 202]:
        refused = gw.wait_for(address, "approval_refused")
        [second] = bodies(refused, ApprovalRefused)
        assert (second.reason, second.request_id) == ("already_answered", request)
        assert {applied[0].by, second.by} == key_ids


def wait_for_end(gw: GatewayStack, address: str, turn: int, timeout: float = 60) -> TurnEnded:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in gw.timeline(address):
            if event.turn == turn and isinstance(event.body, TurnEnded):
                return event.body
        time.sleep(0.1)
    raise AssertionError(f"turn {turn} of {address} did not end within {timeout} s")


def test_a_gateway_restarted_while_the_endpoint_is_down_takes_answers_and_stops(
    careful: GatewayStack,
) -> None:
    """No key is in the new gateway's memory: each is confirmed without the endpoint."""
    gw = careful
    request = waiting_for_approval(gw, "acme.restart-approve")
    waiting_for_approval(gw, "acme.restart-stop")

    gw.endpoint.kill()
    gw.gateway.stop()
    gw.gateway.start()
    listed = gw.http.get("/v1/agents", headers=gw.auth)
    assert listed.status_code == 200, listed.text
    addresses = {agent["address"] for agent in listed.json()["agents"]}
    assert {"acme.restart-approve", "acme.restart-stop"} <= addresses
    answers = [
        timed(gw, f"/v1/agents/acme.restart-approve/approvals/{request}", {"approve": True}),
        timed(gw, "/v1/agents/acme.restart-stop/stop"),
    ]
    for response, seconds in answers:
        assert response.status_code == 202, response.text
        assert seconds < 1.0, f"{response.request.url} took {seconds:.2f} s"
    gw.endpoint.start()

    approved = wait_for_end(gw, "acme.restart-approve", 1)
    assert (approved.outcome, approved.reply) == ("succeeded", "wrote: recorded approved-entry")
    assert ledger(gw, "acme.restart-approve") == Counter({"approved-entry": 1})
    assert len(bodies(gw.timeline("acme.restart-approve"), ApprovalAnswered)) == 1
    assert wait_for_end(gw, "acme.restart-stop", 1).outcome == "stopped"
    assert ledger(gw, "acme.restart-stop") == Counter()
