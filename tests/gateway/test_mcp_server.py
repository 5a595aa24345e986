"""teaspill as an MCP server, on a real stack: the `mcp` SDK's own streamable-HTTP client
against the gateway's `/mcp`, with the gateway's API keys."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import msgspec
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from schemas.events import ApprovalRequested
from services.executor.scripted import script
from services.keys import new_key
from tests.durable.conftest import eventually
from tests.gateway.test_stack import CALCULATE, CREATED, GatewayStack, gateway_stack, made_key

pytestmark = pytest.mark.durable

CAREFUL = {
    "kind": "careful",
    "instructions": "Ask before calculating.",
    "model": "script",
    "tools": {"calculator": "ask"},
}
GREETER = {
    "kind": "greeter",
    "instructions": "Greet.",
    "model": "script",
    "input": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "times": {"type": "integer"}},
        "required": ["name"],
        "additionalProperties": False,
    },
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    """The stack, with tenant beta's kind `private` published beside acme's `calc`."""
    with gateway_stack(tmp_path_factory.mktemp("mcp-home")) as stack:
        plaintext, key = new_key("beta", "admin", CREATED)
        added = httpx.post(
            f"{stack.settings.ingress_url}/Tenant/beta/add_key",
            content=msgspec.json.encode(key),
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert added.status_code == 200, added.text
        auth = {"Authorization": f"Bearer {plaintext}"}
        spec = {"kind": "private", "instructions": "Be brief.", "model": "script"}
        published = eventually(
            lambda: (
                stack.http.post("/v1/specs", json=spec, headers=auth).status_code == 201 or None
            ),
            60,
            "tenant beta's key to publish",
        )
        assert published
        for own in (CAREFUL, GREETER):
            mine = stack.http.post("/v1/specs", json=own, headers=stack.auth)
            assert mine.status_code == 201, mine.text
        yield stack


def _mcp(gw: GatewayStack, key: str, work: Any) -> Any:
    async def run() -> Any:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{gw.gateway.url}/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)

    return asyncio.run(run())


def test_the_sdk_client_lists_only_its_own_tenants_kinds(gw: GatewayStack) -> None:
    async def names(session: ClientSession) -> list[str]:
        listed = await session.list_tools()
        return [tool.name for tool in listed.tools]

    assert _mcp(gw, gw.key, names) == ["calc", "careful", "greeter"]


def test_a_call_sends_the_message_and_returns_the_reply(gw: GatewayStack) -> None:
    async def call(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool("calc", {"message": CALCULATE})

    result = _mcp(gw, gw.key, call)
    assert not result.is_error, result.content
    assert _text(result) == "It is 42"
    address = (result.structured_content or {})["agent"]
    assert address.startswith("acme.")
    shape = [str(e.body.__struct_config__.tag) for e in gw.timeline(address)]
    assert shape[0] == "turn_started"
    assert shape[-1] == "turn_ended"

    async def again(session: ClientSession) -> types.CallToolResult:
        reply = script({"reply": "still here"})
        return await session.call_tool("calc", {"message": reply, "agent": address})

    second = _mcp(gw, gw.key, again)
    assert not second.is_error, second.content
    assert (second.structured_content or {}) == {"agent": address, "reply": "still here"}
    turns = {e.turn for e in gw.timeline(address)}
    assert len(turns) == 2


def test_a_turn_that_waits_for_approval_says_how_to_answer(gw: GatewayStack) -> None:
    async def call(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool("careful", {"message": CALCULATE})

    result = _mcp(gw, gw.key, call)
    assert result.is_error
    address = (result.structured_content or {})["agent"]
    asked = [e.body for e in gw.timeline(address) if isinstance(e.body, ApprovalRequested)]
    assert len(asked) == 1
    assert f"POST /v1/agents/{address}/approvals/{asked[0].request_id}" in _text(result)


def test_another_tenants_kind_and_agents_cannot_be_called(gw: GatewayStack) -> None:
    async def call(session: ClientSession) -> list[types.CallToolResult]:
        kind = await session.call_tool("private", {"message": "hello"})
        agent = await session.call_tool("calc", {"message": "hi", "agent": "beta.someone"})
        return [kind, agent]

    kind, agent = _mcp(gw, gw.key, call)
    assert kind.is_error
    assert "no spec of kind 'private'" in _text(kind)
    assert agent.is_error
    assert "there is no agent beta.someone" in _text(agent)


def test_a_kind_with_an_input_schema_takes_its_arguments_as_the_message(
    gw: GatewayStack,
) -> None:
    async def use(session: ClientSession) -> tuple[types.Tool, types.CallToolResult]:
        listed = await session.list_tools()
        tool = next(tool for tool in listed.tools if tool.name == "greeter")
        return tool, await session.call_tool("greeter", {"name": "Ada", "idempotency_key": "g1"})

    tool, result = _mcp(gw, gw.key, use)
    assert tool.input_schema["required"] == ["name"]
    assert sorted(tool.input_schema["properties"]) == ["agent", "idempotency_key", "name", "times"]
    assert not result.is_error, result.content
    # the script model echoes a message that is not a script: the agent read the JSON
    assert _text(result) == 'You said: {"name": "Ada"}'


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({}, "arguments: name required by the input schema of greeter."),
        (
            {"name": "Ada", "times": "twice"},
            'arguments.times: "twice" does not meet the rule {"type": "integer"} of the input '
            "schema of greeter.",
        ),
        (
            {"message": "hello"},
            "arguments: name required by the input schema of greeter.",
        ),
    ],
    ids=["missing", "wrong-type", "a-message-instead"],
)
def test_arguments_that_do_not_match_the_input_schema_get_a_sentence(
    gw: GatewayStack, arguments: dict[str, Any], says: str
) -> None:
    async def call(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool("greeter", arguments)

    result = _mcp(gw, gw.key, call)
    assert result.is_error
    assert _text(result) == says


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_a_read_key_lists_the_tools_but_cannot_call_them(gw: GatewayStack) -> None:
    plaintext = made_key(gw.settings, gw.http, "acme", "read")

    async def use(session: ClientSession) -> tuple[list[str], types.CallToolResult]:
        listed = await session.list_tools()
        called = await session.call_tool("calc", {"message": "hello"})
        return [tool.name for tool in listed.tools], called

    names, called = _mcp(gw, plaintext, use)
    assert names == ["calc", "careful", "greeter"]
    assert called.is_error
    assert _text(called) == "calling an agent needs a write key; this key is read"


def test_a_message_that_is_not_text_gets_a_sentence(gw: GatewayStack) -> None:
    async def call(session: ClientSession) -> list[types.CallToolResult]:
        return [
            await session.call_tool("calc", {"message": ""}),
            await session.call_tool("calc", {}),
        ]

    empty, missing = _mcp(gw, gw.key, call)
    assert empty.is_error
    assert _text(empty) == (
        "message: the text to send to the agent is empty; send at least a character."
    )
    assert missing.is_error
    assert _text(missing) == (
        "message: the tool takes `message`, the text to send to the agent; this call has none."
    )


UNKNOWN = new_key("acme", "admin", CREATED)[0]


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "missing API key"),
        (f"Bearer {UNKNOWN}", "unknown API key"),
        ("Basic abc", "malformed Authorization header"),
    ],
    ids=["none", "unknown", "malformed"],
)
def test_a_wrong_key_gets_401(gw: GatewayStack, header: str | None, says: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    if header is not None:
        headers["Authorization"] = header
    response = gw.http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 401, response.text
    assert response.json()["error"]["message"].startswith(says)
