"""MCP Tasks on the gateway, on a real stack: a turn as a task a client polls, through a
SIGKILL of the endpoint, cancelled by a stop, hidden from other tenants. The 2025-11-25
form is spoken as raw JSON-RPC (the SDK's client validates a `tools/call` answer as a
tool result, so it cannot take a task); the stateless revision's extension through the
SDK's own client, with a result claim that polls `tasks/get`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from itertools import count
from typing import Any, Literal

import httpx
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.streamable_http import streamable_http_client

from schemas.events import TurnEnded
from services.executor.scripted import script
from tests.durable.conftest import eventually
from tests.gateway.test_mcp_server import CAREFUL
from tests.gateway.test_stack import CALCULATE, GatewayStack, gateway_stack, made_key

pytestmark = pytest.mark.durable

EXTENSION = "io.modelcontextprotocol/tasks"
SLOW = script({"sleep": 6.0, "reply": "slow and done"})
LONG = script({"sleep": 120.0, "reply": "never"})
_ids = count(1)
QUICK = {
    "kind": "quick",
    "instructions": "Be quick.",
    "model": "script",
    "task_support": "forbidden",
}
BATCH = {
    "kind": "batch",
    "instructions": "Take time.",
    "model": "script",
    "task_support": "required",
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("mcp-tasks-home")) as stack:
        for spec in (CAREFUL, QUICK, BATCH):
            published = stack.http.post("/v1/specs", json=spec, headers=stack.auth)
            assert published.status_code == 201, published.text
        # tools/list reads the projection, which lists a kind once the projector has
        # written its spec: wait until it lists all three
        kinds = {str(spec["kind"]) for spec in (CAREFUL, QUICK, BATCH)}
        eventually(
            lambda: (
                kinds <= {tool["name"] for tool in rpc(stack, "tools/list", {})["tools"]} or None
            ),
            30,
            "the projection to list the published kinds",
        )
        yield stack


def rpc(gw: GatewayStack, method: str, params: dict[str, Any], key: str | None = None) -> Any:
    """One 2025-11-25 request; the JSON-RPC `result`, or the `error` object."""
    headers = {
        "Authorization": f"Bearer {key or gw.key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    response = gw.http.post("/mcp", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    answer = response.json()
    return answer.get("result", answer.get("error"))


def create(gw: GatewayStack, kind: str, message: str, **more: str) -> dict[str, Any]:
    arguments = {"message": message, **more}
    result = rpc(gw, "tools/call", {"name": kind, "arguments": arguments, "task": {}})
    assert "task" in result, result
    task: dict[str, Any] = result["task"]
    return task


def poll(gw: GatewayStack, task_id: str, status: str) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = rpc(gw, "tasks/get", {"taskId": task_id})
        except httpx.TransportError:
            return None
        return found if found.get("status") == status else None

    return eventually(seen, 120, f"task {task_id} to be {status}")


def test_the_server_advertises_tasks_and_each_tool_supports_them(gw: GatewayStack) -> None:
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    }
    capabilities = rpc(gw, "initialize", init)["capabilities"]
    assert capabilities["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = rpc(gw, "tools/list", {})["tools"]
    supports = {tool["name"]: tool["execution"]["taskSupport"] for tool in tools}
    assert supports == {
        "batch": "required",
        "calc": "optional",
        "careful": "optional",
        "quick": "forbidden",
    }


def test_a_kind_that_forbids_tasks_answers_with_its_result_and_refuses_a_task(
    gw: GatewayStack,
) -> None:
    result = rpc(gw, "tools/call", {"name": "quick", "arguments": {"message": "hi"}})
    assert result["content"] == [{"type": "text", "text": "You said: hi"}]
    asked = rpc(gw, "tools/call", {"name": "quick", "arguments": {"message": "hi"}, "task": {}})
    assert asked["code"] == -32601
    assert asked["message"] == "the tool quick is not called as a task: call it without `task`"


def test_a_kind_that_requires_tasks_refuses_a_plain_call(gw: GatewayStack) -> None:
    refused = rpc(gw, "tools/call", {"name": "batch", "arguments": {"message": "hi"}})
    assert refused["code"] == -32601
    assert refused["message"] == "the tool batch runs only as a task: call it with `task`"
    task = create(gw, "batch", "hi")
    done = poll(gw, task["taskId"], "completed")
    assert done["taskId"] == task["taskId"]


def test_a_task_is_created_polled_and_gives_the_turns_result(gw: GatewayStack) -> None:
    task = create(gw, "calc", CALCULATE)
    assert task["status"] in {"working", "completed"}
    assert task["ttl"] is None
    address, _ = task["taskId"].split("/")
    assert address.startswith("acme.mcp-calc-")
    done = poll(gw, task["taskId"], "completed")
    assert done["createdAt"] <= done["lastUpdatedAt"]
    result = rpc(gw, "tasks/result", {"taskId": task["taskId"]})
    assert result["content"] == [{"type": "text", "text": "It is 42"}]
    assert result["structuredContent"] == {"agent": address, "reply": "It is 42"}
    assert result["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": task["taskId"]}}


def test_tasks_result_waits_for_the_turn_to_end(gw: GatewayStack) -> None:
    task = create(gw, "calc", SLOW)
    result = rpc(gw, "tasks/result", {"taskId": task["taskId"]})
    assert result["content"] == [{"type": "text", "text": "slow and done"}]
    assert rpc(gw, "tasks/get", {"taskId": task["taskId"]})["status"] == "completed"


def test_a_task_in_flight_survives_a_sigkill_of_the_endpoint_and_the_gateway(
    gw: GatewayStack,
) -> None:
    task = create(gw, "calc", SLOW)
    assert rpc(gw, "tasks/get", {"taskId": task["taskId"]})["status"] == "working"
    gw.endpoint.kill()
    gw.endpoint.start()
    gw.gateway.kill()
    gw.gateway.start()
    poll(gw, task["taskId"], "completed")
    result = rpc(gw, "tasks/result", {"taskId": task["taskId"]})
    assert result["content"] == [{"type": "text", "text": "slow and done"}]
    address = task["taskId"].split("/")[0]
    ends = [e for e in gw.timeline(address) if isinstance(e.body, TurnEnded)]
    assert len(ends) == 1


def test_cancelling_a_task_stops_its_turn(gw: GatewayStack) -> None:
    task = create(gw, "calc", LONG)
    cancelled = rpc(gw, "tasks/cancel", {"taskId": task["taskId"]})
    assert cancelled["status"] == "cancelled"
    address = task["taskId"].split("/")[0]
    ends = [e.body for e in gw.timeline(address) if isinstance(e.body, TurnEnded)]
    assert [end.outcome for end in ends] == ["stopped"]
    again = rpc(gw, "tasks/cancel", {"taskId": task["taskId"]})
    assert again["code"] == types.INVALID_PARAMS
    assert again["message"].startswith(f"task {task['taskId']} already ended")


def test_another_tenants_task_is_not_visible(gw: GatewayStack) -> None:
    task = create(gw, "calc", CALCULATE)
    other = made_key(gw.settings, gw.http, "beta", "admin")
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = rpc(gw, method, {"taskId": task["taskId"]}, key=other)
        assert error == {
            "code": types.INVALID_PARAMS,
            "message": f"there is no task {task['taskId']}",
        }
    unknown = rpc(gw, "tasks/get", {"taskId": "acme.nobody/m0"})
    assert unknown == {"code": types.INVALID_PARAMS, "message": "there is no task acme.nobody/m0"}


def test_a_call_sent_again_with_its_idempotency_key_is_the_same_turn(gw: GatewayStack) -> None:
    first = create(gw, "calc", CALCULATE, idempotency_key="order-17")
    poll(gw, first["taskId"], "completed")
    again = create(gw, "calc", CALCULATE, idempotency_key="order-17")
    assert again["taskId"] == first["taskId"]
    assert again["status"] == "completed"
    address = first["taskId"].split("/")[0]
    assert len({e.turn for e in gw.timeline(address)}) == 1

    direct = rpc(
        gw,
        "tools/call",
        {"name": "calc", "arguments": {"message": CALCULATE, "idempotency_key": "order-17"}},
    )
    assert direct["structuredContent"] == {"agent": address, "reply": "It is 42"}
    assert len({e.turn for e in gw.timeline(address)}) == 1


# --- the stateless revision's extension, through the SDK's client -----------------------


class TaskHandle(types.Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class GetTask(types.Request[types.GetTaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: types.GetTaskRequestParams


class DetailedTask(types.Result):
    task_id: str
    status: str
    result: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


async def _finished(session: ClientSession, task_id: str) -> DetailedTask:
    """`tasks/get` until the task ends, through the session (which stamps each request
    with its revision and capabilities)."""
    while True:
        request = GetTask(params=types.GetTaskRequestParams(task_id=task_id))
        task = await session.send_request(request, DetailedTask)
        if task.status in {"completed", "cancelled", "failed"}:
            return task
        await asyncio.sleep(0.2)


async def _resolve(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    task = await _finished(ctx.session, handle.task_id)
    return types.CallToolResult.model_validate(task.result)


def _modern(gw: GatewayStack, work: Any) -> Any:
    claim = ResultClaim(result_type="task", model=TaskHandle, resolve=_resolve)

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {gw.key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{gw.gateway.url}/mcp", http_client=http) as (read, write, *_),
            ClientSession(
                read, write, extensions={EXTENSION: {}}, result_claims={EXTENSION: [claim]}
            ) as session,
        ):
            discovered = await session.discover()
            assert EXTENSION in (discovered.capabilities.extensions or {})
            return await work(session)

    return asyncio.run(run())


def test_the_sdk_client_gets_a_task_handle_and_polls_it_to_the_reply(gw: GatewayStack) -> None:
    async def call(session: ClientSession) -> tuple[Any, DetailedTask]:
        handle = await session.call_tool("calc", {"message": CALCULATE}, allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle
        return handle, await _finished(session, handle.task_id)

    handle, task = _modern(gw, call)
    assert handle.task_id.startswith("acme.mcp-calc-")
    assert task.status == "completed"
    assert task.result is not None
    assert task.result["content"] == [{"type": "text", "text": "It is 42"}]


class UpdateParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams


def test_an_approval_is_an_input_request_that_tasks_update_answers(gw: GatewayStack) -> None:
    async def call(session: ClientSession) -> tuple[DetailedTask, DetailedTask]:
        handle = await session.call_tool("careful", {"message": CALCULATE}, allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle
        while True:
            request = GetTask(params=types.GetTaskRequestParams(task_id=handle.task_id))
            waiting = await session.send_request(request, DetailedTask)
            if waiting.status == "input_required":
                break
            await asyncio.sleep(0.2)
        (request_id,) = (waiting.input_requests or {}).keys()
        answer = {"action": "accept", "content": {"approve": True}}
        params = UpdateParams(task_id=handle.task_id, input_responses={request_id: answer})
        update = UpdateTask(params=params)
        await session.send_request(update, types.EmptyResult)
        return waiting, await _finished(session, handle.task_id)

    waiting, task = _modern(gw, call)
    (asked,) = (waiting.input_requests or {}).values()
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["requestedSchema"]["required"] == ["approve"]
    assert "calculator" in asked["params"]["message"]
    assert task.status == "completed"
    assert task.result is not None
    assert task.result["content"] == [{"type": "text", "text": "It is 42"}]


def test_a_2025_task_that_waits_for_approval_is_input_required(gw: GatewayStack) -> None:
    task = create(gw, "careful", CALCULATE)
    waiting = poll(gw, task["taskId"], "input_required")
    assert "calculator" in waiting["statusMessage"]
    result = rpc(gw, "tasks/result", {"taskId": task["taskId"]})
    assert result["isError"] is True
    assert "POST /v1/agents/" in result["content"][0]["text"]


def _stateless(gw: GatewayStack, work: Any) -> Any:
    """The SDK's client on the stateless revision, without the Tasks extension."""

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {gw.key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{gw.gateway.url}/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.discover()
            return await work(session)

    return asyncio.run(run())


def test_an_approval_is_input_required_and_the_answered_call_resumes_the_turn(
    gw: GatewayStack,
) -> None:
    async def call(session: ClientSession) -> tuple[Any, Any]:
        first = await session.call_tool(
            "careful", {"message": CALCULATE}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult), first
        (request_id,) = (first.input_requests or {}).keys()
        answer = types.ElicitResult(action="accept", content={"approve": True})
        second = await session.call_tool(
            "careful",
            {"message": CALCULATE},
            input_responses={request_id: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
        return first, second

    first, second = _stateless(gw, call)
    (asked,) = (first.input_requests or {}).values()
    assert asked.method == "elicitation/create"
    assert isinstance(second, types.CallToolResult), second
    assert not second.is_error, second.content
    assert second.content == [types.TextContent(type="text", text="It is 42")]
    address = (second.structured_content or {})["agent"]
    assert len({e.turn for e in gw.timeline(address)}) == 1


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
}


def test_a_listen_stream_notifies_a_tasks_changes_and_ends_with_it(gw: GatewayStack) -> None:
    task = create(gw, "calc", SLOW)
    foreign = create_for(gw, made_key(gw.settings, gw.http, "gamma", "admin"))
    params = {
        "notifications": {"taskIds": [task["taskId"], foreign, "acme.nobody/m0"]},
        "_meta": MODERN_META,
    }
    body = {"jsonrpc": "2.0", "id": 99, "method": "subscriptions/listen", "params": params}
    headers = {
        "Authorization": f"Bearer {gw.key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    with gw.http.stream("POST", "/mcp", json=body, headers=headers, timeout=120) as response:
        assert response.status_code == 200
        frames = [
            json.loads(line.removeprefix("data:"))
            for line in response.iter_lines()
            if line.startswith("data:") and line.removeprefix("data:").strip()
        ]
    ack, *notes, end = frames
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [task["taskId"]]}
    assert {note["method"] for note in notes} == {"notifications/tasks"}
    assert {
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for note in notes
    } == {99}
    statuses = [note["params"]["status"] for note in notes]
    assert statuses[0] == "working"
    assert statuses[-1] == "completed"
    result = notes[-1]["params"]["result"]
    assert result["content"] == [{"type": "text", "text": "slow and done"}]
    assert end["id"] == 99
    assert "result" in end


def create_for(gw: GatewayStack, key: str) -> str:
    """A task of another tenant: its own kind published, then called as a task."""
    spec = {"kind": "other", "instructions": "Be brief.", "model": "script"}
    auth = {"Authorization": f"Bearer {key}"}
    published = gw.http.post("/v1/specs", json=spec, headers=auth)
    assert published.status_code == 201, published.text
    call = {"name": "other", "arguments": {"message": "hi"}, "task": {}}
    return str(rpc(gw, "tools/call", call, key)["task"]["taskId"])
