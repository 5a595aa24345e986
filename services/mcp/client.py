"""One connection to one MCP server, made through the `mcp` SDK for one operation (a
listing or a call) and closed after it.

A connection per operation keeps nothing alive between steps: any replica, or an endpoint
restarted mid-turn, makes the same call the same way. The SDK negotiates the revision
(`mode="auto"`: it asks `server/discover`, the stateless 2026-07-28 revision, and falls
back to the `initialize` handshake of the session-based ones).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import Client
from mcp.client import Transport
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import x_mcp_header_map

from schemas.questions import InputAnswer
from services.mcp.asking import MidCall, responses_of
from services.mcp.completing import completing
from services.mcp.config import Server, resolved

IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_PAGES = 10
"""Pages of a tool listing read at most (a paginator that never ends cannot hang a turn)."""


@asynccontextmanager
async def connected(
    server: Server,
    idempotency_key: str = "",
    seconds: float = 60.0,
    mid_call: MidCall | None = None,
) -> AsyncIterator[Client]:
    """A client of `server`; secrets are read here and held by the connection alone.
    `idempotency_key` goes to an HTTP server as the `Idempotency-Key` header; `mid_call`
    answers what a session-based server asks during a call (without one, nothing is
    offered)."""
    if server.url:
        headers = resolved(server.headers)
        if idempotency_key:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        async with httpx2.AsyncClient(headers=headers, timeout=seconds) as http:
            transport = streamable_http_client(server.url, http_client=http)
            async with _client(transport, mid_call) as client:
                yield client
        return
    params = StdioServerParameters(
        command=server.command,
        args=list(server.args),
        env={**get_default_environment(), **resolved(server.env)},
    )
    # a server's stderr may echo its environment; opening the null device does not block
    with Path(os.devnull).open("w") as quiet:  # noqa: ASYNC230
        async with _client(stdio_client(params, errlog=quiet), mid_call) as client:
            yield client


def _client(transport: Transport, mid_call: MidCall | None) -> Client:
    return Client(completing(transport), mode="auto", cache=None, elicitation_callback=mid_call)


async def list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    schema: dict[str, Any] | None = None,
    answer: InputAnswer | None = None,
) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
    """Call `name`, or call it again with a person's `answer`; `schema` is its input schema
    as the catalog listed it. An input-required result is returned as it is: the turn
    waits for a person, which no connection may do. Arguments that the schema marks
    `x-mcp-header` go to a 2026-07-28 server as `Mcp-Param-*` headers too: the SDK adds
    those only for a tool its session has listed, and this connection has listed
    nothing, so such a tool is listed first. So is every tool called again with an
    answer: the SDK lists a tool after a call to check its result against the tool's
    output schema anyway, and listing first gives the call again a JSON-RPC id other
    than the first call's (each connection numbers its requests from the start, and the
    revision wants the two told apart)."""
    if answer is not None or (schema is not None and x_mcp_header_map(schema)):
        await list_tools(client)
    return await client.session.call_tool(
        name,
        arguments,
        input_responses=responses_of(answer) if answer is not None else None,
        request_state=answer.asked.state if answer is not None else None,
        allow_input_required=True,
    )
