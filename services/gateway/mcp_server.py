"""teaspill as an MCP server: `/mcp` serves the Model Context Protocol over streamable
HTTP, one stateless request at a time.

The key is checked by the gateway's own middleware, as on every `/v1/` route, so a
request without a valid key is answered 401 before MCP reads it. Each published kind of
the key's tenant is a tool (newest version); another tenant's kinds are never listed and
cannot be called. A call sends `message` through the gateway's service layer (a write
key), to the agent `agent` names or to a new agent of that kind, follows the timeline to
the end of the turn its message started, and returns the reply.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from schemas.events import ApprovalRequested, Event, TurnEnded, TurnParked, TurnStarted
from services.gateway import service
from services.gateway.auth import PRINCIPAL, Owned, Principal, own
from services.gateway.errors import ApiError, validation_message
from services.gateway.models import MessageIn
from services.gateway.runtime import Runtime

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The message to the agent."},
        "agent": {
            "type": "string",
            "description": "The address of an agent to continue its conversation "
            "(the `agent` of an earlier result); without it a new agent is made.",
        },
    },
    "required": ["message"],
}


class Mcp:
    """The MCP server of one gateway app: an ASGI app, and the lifespan it needs."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.server: Server[Any] = Server(
            "teaspill", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )
        self.manager = self._manager()
        self._ran = False

    def _manager(self) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(self.server, stateless=True, json_response=True)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A session manager runs once: an app started again (tests start one app many
        times) gets a new one."""
        if self._ran:
            self.manager = self._manager()
        self._ran = True
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await StreamableHTTPASGIApp(self.manager)(scope, receive, send)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tenant = _caller(ctx).tenant
        specs = await self.rt.projection.read(lambda store: store.specs(tenant))
        newest = {published.spec.kind: published.spec for published in specs}
        tools = [
            types.Tool(
                name=kind,
                description=f"Send a message to a teaspill agent of kind {kind} "
                f"(version {spec.version}) and get its reply when the turn ends.",
                input_schema=INPUT_SCHEMA,
            )
            for kind, spec in sorted(newest.items())
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = _caller(ctx)
        try:
            return await self._run(caller, params.name, params.arguments or {})
        except ApiError as error:
            return _failed(error.message)

    async def _run(
        self, caller: Principal, kind: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        call = secrets.token_hex(8)
        address = arguments.get("agent") or f"{caller.tenant}.mcp-{kind.lower()[:24]}-{call}"
        if not isinstance(address, str):
            return _failed("agent: expected the address of an agent, as a string")
        agent = own(caller, address, "write", doing="calling an agent", field="agent")
        try:
            message = MessageIn.model_validate({"text": arguments.get("message"), "kind": kind})
        except ValidationError as error:
            sentence = validation_message(error.errors())[1]
            return _failed(sentence.replace("text: ", "message: ", 1))
        accepted = await service.send(self.rt, agent, message, f"mcp {call}")
        ending = await _turn_end(self.rt, agent, accepted.after_seq, accepted.message_id)
        return _result(address, ending)


def _caller(ctx: ServerRequestContext[Any]) -> Principal:
    found = ctx.request.scope.get(PRINCIPAL) if ctx.request is not None else None
    if not isinstance(found, Principal):
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'")
    return found


async def _turn_end(rt: Runtime, agent: Owned, after: int, message_id: str) -> Event | None:
    """The event that ends the turn `message_id` started, or that makes it wait for a
    person; None if the gateway stopped following first."""
    turn: int | None = None
    items = service.follow(rt, agent, after)
    try:
        async for item in items:
            if not isinstance(item, Event):
                continue
            body = item.body
            if turn is None and isinstance(body, TurnStarted) and body.message_id == message_id:
                turn = item.turn
            if item.turn == turn and isinstance(body, TurnEnded | ApprovalRequested | TurnParked):
                return item
    finally:
        await items.aclose()
    return None


def _result(address: str, ending: Event | None) -> types.CallToolResult:
    body = ending.body if ending is not None else None
    if isinstance(body, TurnEnded) and body.outcome == "succeeded":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=body.reply)],
            structured_content={"agent": address, "reply": body.reply},
        )
    if isinstance(body, TurnEnded):
        return _failed(body.reason or f"the turn ended {body.outcome}", address)
    if isinstance(body, ApprovalRequested | TurnParked):
        return _failed(
            f"the turn of agent {address} waits for a person to answer approval request "
            f"{body.request_id}: answer it with POST /v1/agents/{address}/approvals/"
            f"{body.request_id}",
            address,
        )
    return _failed(
        f"the gateway stopped following agent {address} before its turn ended; "
        f"read GET /v1/agents/{address}/timeline for the rest",
        address,
    )


def _failed(sentence: str, address: str | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=sentence)],
        structured_content={"agent": address} if address else None,
        is_error=True,
    )
