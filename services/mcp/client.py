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
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import x_mcp_header_map

from services.mcp.config import Server, resolved

IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_PAGES = 10
"""Pages of a tool listing read at most (a paginator that never ends cannot hang a turn)."""


@asynccontextmanager
async def connected(
    server: Server, idempotency_key: str = "", seconds: float = 60.0
) -> AsyncIterator[Client]:
    """A client of `server`; secrets are read here and held by the connection alone.
    `idempotency_key` goes to an HTTP server as the `Idempotency-Key` header."""
    if server.url:
        headers = resolved(server.headers)
        if idempotency_key:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        async with httpx2.AsyncClient(headers=headers, timeout=seconds) as http:
            transport = streamable_http_client(server.url, http_client=http)
            async with Client(transport, mode="auto", cache=None) as client:
                yield client
        return
    params = StdioServerParameters(
        command=server.command,
        args=list(server.args),
        env={**get_default_environment(), **resolved(server.env)},
    )
    # a server's stderr may echo its environment; opening the null device does not block
    with Path(os.devnull).open("w") as quiet:  # noqa: ASYNC230
        async with Client(stdio_client(params, errlog=quiet), mode="auto", cache=None) as client:
            yield client


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
    client: Client, name: str, arguments: dict[str, Any], schema: dict[str, Any] | None = None
) -> mcp_types.CallToolResult:
    """Call `name`; `schema` is its input schema as the catalog listed it. Arguments that
    the schema marks `x-mcp-header` go to a 2026-07-28 server as `Mcp-Param-*` headers too:
    the SDK adds those only for a tool its session has listed, and this connection has
    listed nothing, so such a tool is listed first."""
    if schema is not None and x_mcp_header_map(schema):
        await list_tools(client)
    return await client.call_tool(name, arguments)
