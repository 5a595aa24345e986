"""A message the agent refuses, through the gateway's MCP, A2A and AG-UI servers on a real
stack: an agent whose own day of tokens is used (`max_daily_tokens`) records the next
message as `message_rejected`, and each call that sent it ends at once with the agent's
sentence instead of waiting for a turn that never starts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from a2a.client import Client
from a2a.types import GetTaskRequest, Task, TaskState
from mcp import ClientSession, types

from schemas.events import MessageRejected
from tests.gateway.test_a2a import _run, _send
from tests.gateway.test_a2a import _text as a2a_text
from tests.gateway.test_mcp_server import _mcp
from tests.gateway.test_mcp_server import _text as mcp_text
from tests.gateway.test_mcp_tasks import create, poll, rpc
from tests.gateway.test_stack import CALCULATE, GatewayStack, gateway_stack

pytestmark = pytest.mark.durable

FRUGAL = {
    "kind": "frugal",
    "instructions": "Use the calculator.",
    "model": "script",
    "tools": ["calculator"],
    "limits": {"max_daily_tokens": 1},
}
PATIENCE = 60.0
"""Seconds a refused message may take to be answered: far less than a call would wait."""


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("rejected-home")) as stack:
        published = stack.http.post("/v1/specs", json=FRUGAL, headers=stack.auth)
        assert published.status_code == 201, published.text
        yield stack


def _spent(gw: GatewayStack, address: str) -> str:
    """The address of an agent of kind frugal whose one turn used its day."""
    response = gw.http.post(
        f"/v1/agents/{address}/messages",
        json={"text": CALCULATE, "kind": "frugal"},
        headers=gw.auth,
    )
    assert response.status_code == 202, response.text
    gw.wait_for(address, "turn_ended")
    return address


def _refusals(gw: GatewayStack, address: str) -> list[str]:
    return [e.body.message for e in gw.timeline(address) if isinstance(e.body, MessageRejected)]


def test_an_mcp_call_the_agent_refuses_is_a_tool_error_with_its_sentence(
    gw: GatewayStack,
) -> None:
    address = _spent(gw, "acme.frugal-mcp")

    async def call(session: ClientSession) -> types.CallToolResult:
        async with asyncio.timeout(PATIENCE):
            return await session.call_tool("frugal", {"message": "again", "agent": address})

    result = _mcp(gw, gw.key, call)
    assert result.is_error
    (sentence,) = _refusals(gw, address)
    assert "(max_daily_tokens = 1): it starts no turn until midnight UTC." in sentence
    assert mcp_text(result) == sentence

    task = create(gw, "frugal", "and again", agent=address)
    done = poll(gw, task["taskId"], "completed")
    assert done["statusMessage"] == sentence
    result_of = rpc(gw, "tasks/result", {"taskId": task["taskId"]})
    assert result_of["isError"] is True
    assert result_of["content"] == [{"type": "text", "text": sentence}]


def test_an_a2a_send_the_agent_refuses_ends_its_task_rejected_with_its_sentence(
    gw: GatewayStack,
) -> None:
    address = _spent(gw, "acme.frugal-a2a")

    async def talk(client: Client) -> tuple[Task, Task]:
        async with asyncio.timeout(PATIENCE):
            sent = await _send(client, "again", address)
            return sent, await client.get_task(GetTaskRequest(id=sent.id))

    sent, read = _run(gw, talk, kind="frugal")
    (sentence,) = _refusals(gw, address)
    assert "max_daily_tokens = 1" in sentence
    for task in (sent, read):
        assert task.id == sent.id
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        assert a2a_text(task) == sentence
    assert [m.parts[0].text for m in sent.history] == ["again"]


def test_an_ag_ui_run_the_agent_refuses_ends_with_a_run_error_with_its_sentence(
    gw: GatewayStack,
) -> None:
    address = _spent(gw, "acme.frugal-agui")
    run = {
        "threadId": address,
        "runId": "r2",
        "messages": [{"id": "u1", "role": "user", "content": "again"}],
        "forwardedProps": {"kind": "frugal"},
    }
    events: list[dict[str, object]] = []
    with gw.http.stream(
        "POST", "/v1/agui", json=run, headers=gw.auth, timeout=PATIENCE
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
                if events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    break
    (sentence,) = _refusals(gw, address)
    assert events[-1]["type"] == "RUN_ERROR", events
    assert (events[-1]["message"], events[-1]["code"]) == (sentence, "rejected")
