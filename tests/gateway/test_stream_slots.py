"""The key's stream slots on a real stack, for the A2A and MCP requests that wait on a
turn: with one slot, a listen that holds it makes every other waiting request of the key
refused with a sentence, and the slot comes back when the request that held it ends."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from schemas.events import TurnStarted
from services.executor.scripted import script
from tests.gateway.test_mcp_tasks import MODERN_META, create, rpc
from tests.gateway.test_stack import GatewayStack, gateway_stack

pytestmark = pytest.mark.durable

LONG = script({"sleep": 120.0, "reply": "never"})
FULL = "streams open, the most one key may hold; close one first"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("slots-home"), key_streams=1) as stack:
        yield stack


def listen(gw: GatewayStack, task_id: str, acknowledged: threading.Event) -> list[Any]:
    """A `subscriptions/listen` on the task: its frames, once the stream ended."""
    params = {"notifications": {"taskIds": [task_id]}, "_meta": MODERN_META}
    body = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": params}
    headers = {
        "Authorization": f"Bearer {gw.key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    frames = []
    with gw.http.stream("POST", "/mcp", json=body, headers=headers, timeout=120) as response:
        for line in response.iter_lines():
            data = line.removeprefix("data:").strip()
            if line.startswith("data:") and data:
                frames.append(json.loads(data))
                acknowledged.set()
            elif response.status_code != 200:
                frames.append(json.loads(line))
                acknowledged.set()
    return frames


def a2a(gw: GatewayStack, method: str, params: dict[str, Any]) -> Any:
    """One v0.3 JSON-RPC request to the `calc` agent: its answer (or its first SSE frame)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {**gw.auth, "Accept": "application/json, text/event-stream"}
    response = gw.http.post("/a2a/calc", json=body, headers=headers, timeout=120)
    text = response.text
    if text.startswith("data:") or "\ndata:" in text:
        data = next(line for line in text.splitlines() if line.startswith("data:"))
        return response.status_code, json.loads(data.removeprefix("data:"))
    return response.status_code, response.json()


def refused(error: Any) -> None:
    """A JSON-RPC error answering past the key's slots, with the sentence."""
    assert isinstance(error, dict), error
    assert (error.get("code"), error.get("data")) == (-32600, {"status": 429}), error
    assert error["message"].endswith(FULL), error


def refused_429(gw: GatewayStack, version: str, method: str, params: dict[str, Any]) -> None:
    """An MCP request past the key's slots: HTTP 429 with `Retry-After`, its body the
    JSON-RPC error with the sentence."""
    headers = {
        **gw.auth,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Mcp-Method": method,
    }
    if version == "2026-07-28":  # without the Tasks extension: the call waits for its turn
        meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {}}
        params = {**params, "_meta": meta}
        headers["Mcp-Name"] = str(params.get("name") or params.get("taskId"))
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    response = gw.http.post("/mcp", json=body, headers=headers, timeout=120)
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "1"
    answer = response.json()
    assert answer["id"] == 9, answer
    refused(answer["error"])


def test_past_the_slots_waiting_requests_are_refused_until_the_listen_ends(
    gw: GatewayStack,
) -> None:
    task_id = create(gw, "calc", LONG)["taskId"]
    acknowledged = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        listening: Future[list[Any]] = pool.submit(listen, gw, task_id, acknowledged)
        assert acknowledged.wait(60), "the listen was not acknowledged"
        refused_429(gw, "2025-11-25", "tasks/result", {"taskId": task_id})
        call = {"name": "calc", "arguments": {"message": "hi"}}
        refused_429(gw, "2025-11-25", "tools/call", call)
        refused_429(gw, "2026-07-28", "tools/call", call)
        status, resubscribed = a2a(gw, "tasks/resubscribe", {"id": task_id})
        refused(resubscribed.get("error"))
        status, sent = a2a(gw, "message/send", {"message": _message("hi", "s1")})
        refused(sent.get("error"))
        assert rpc(gw, "tasks/cancel", {"taskId": task_id})["status"] == "cancelled"
        frames = listening.result(timeout=120)
    assert frames[0]["method"] == "notifications/subscriptions/acknowledged"
    assert frames[-1]["id"] == 7
    status, followed = a2a(gw, "tasks/resubscribe", {"id": task_id})
    assert (status, followed["result"]["id"]) == (200, task_id), followed
    again = threading.Event()
    assert listen(gw, task_id, again)[-1]["id"] == 7


def test_a_call_that_waits_for_its_turn_holds_the_slot_until_it_answers(
    gw: GatewayStack,
) -> None:
    address = "acme.slots-call"
    body = {"name": "calc", "arguments": {"message": LONG, "agent": address}}
    with ThreadPoolExecutor(1) as pool:
        calling: Future[Any] = pool.submit(rpc, gw, "tools/call", body)
        (started,) = gw.wait_for(address, "turn_started")
        assert isinstance(started.body, TurnStarted)
        task_id = f"{address}/{started.body.message_id}"
        refused_429(gw, "2025-11-25", "tasks/result", {"taskId": task_id})
        stopped = gw.http.post(f"/v1/agents/{address}/stop", headers=gw.auth)
        assert stopped.status_code == 202, stopped.text
        answered = calling.result(timeout=120)
    assert answered["isError"] is True, answered
    status, sent = a2a(gw, "message/send", {"message": _message("after", "s2")})
    assert status == 200, sent
    assert sent["result"]["status"]["state"] == "completed", sent


def _message(text: str, message_id: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": message_id}
