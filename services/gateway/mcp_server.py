"""teaspill as an MCP server: `/mcp` serves the Model Context Protocol over streamable
HTTP, one stateless request at a time.

The key is checked by the gateway's own middleware, as on every `/v1/` route, so a
request without a valid key is answered 401 before MCP reads it. Each published kind of
the key's tenant is a tool (newest version); another tenant's kinds are never listed and
cannot be called. A call sends `message` through the gateway's service layer (a write
key), to the agent `agent` names or to a new agent of that kind, follows the timeline to
the end of the turn its message started, and returns the reply. A call may instead
answer with a task (`mcp_tasks`) that the client polls: the turn goes on either way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from schemas.events import ApprovalRequested, TurnParked
from services.gateway import mcp_tasks
from services.gateway.auth import Owned, Principal, own
from services.gateway.errors import ApiError
from services.gateway.mcp_input import InputError, message_of, tool_schema
from services.gateway.mcp_listen import TaskListen
from services.gateway.mcp_methods import (
    MISSING_CAPABILITY,
    TaskMethods,
    caller_of,
    first_round_asks,
    stream_slot,
    turn_end,
)
from services.gateway.mcp_status import statused
from services.gateway.mcp_tasks import (
    EXTENSION,
    UnknownTaskError,
    broke,
    call_result,
    failed,
    failure,
    input_requests,
)
from services.gateway.runtime import Runtime
from services.gateway.turns import call_id, new_agent, published_kinds, send_to_kind

MAX_KEY = 120


class TeaspillServer(Server[Any]):
    """The SDK's low-level server, advertising the Tasks it serves: the 2025-11-25
    `tasks` capability and the stateless revisions' extension."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        found = super().get_capabilities(*args, **kwargs)
        tasks = types.ServerTasksCapability(
            cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(
                tools=types.TasksToolsCapability(call=types.TasksCallCapability())
            ),
        )
        # `subscriptions/listen` is served for tasks only: the tool list is never said to
        # change (the SDK derives that flag from the listen being served)
        tools = types.ToolsCapability(list_changed=False) if found.tools else None
        return found.model_copy(update={"tasks": tasks, "tools": tools})


class Mcp:
    """The MCP server of one gateway app: an ASGI app, and the lifespan it needs."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.server = TeaspillServer(
            "teaspill",
            version=version("teaspill"),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.server.extensions = {EXTENSION: {}}
        self.server.middleware.append(self._task_call)
        self.tasks = TaskMethods(rt)
        self.tasks.register(self.server)
        listen = TaskListen(self.tasks)
        self.server.add_request_handler(
            "subscriptions/listen", types.SubscriptionsListenRequestParams, listen
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
        await StreamableHTTPASGIApp(self.manager)(scope, receive, statused(send))

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        newest = await published_kinds(self.rt, caller_of(ctx).tenant)
        tools = [
            types.Tool(
                name=kind,
                description=f"Send {'your input' if spec.input else 'a message'} to a "
                f"teaspill agent of kind {kind} (version {spec.version}) and get its reply "
                "when the turn ends.",
                input_schema=tool_schema(spec),
                execution=types.ToolExecution(task_support=spec.task_support),
            )
            for kind, spec in newest.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The turn's reply. On the stateless revision a turn that waits for a person's
        approval answers "input required": the client answers the form and calls again
        with the request state, and the call follows the same turn on. The call holds one
        of the key's stream slots while it waits."""
        caller = caller_of(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        with stream_slot(self.rt, caller):
            try:
                if modern and params.request_state is not None:
                    agent, message_id, after, answered = await self._resume(caller, params)
                else:
                    sent = await self._send(caller, params.name, params.arguments or {})
                    if isinstance(sent, types.CallToolResult):
                        return sent
                    (agent, message_id, after), answered = sent, frozenset[str]()
            except UnansweredError as unanswered:
                return await self._asked_again(unanswered)
            except ApiError as error:
                return failed(error.message)
            ending = await turn_end(self.rt, agent, after, message_id, answered=answered)
        if (ended := broke(ending)) is not None:
            raise MCPError(*failure(agent.address, ended))
        if (
            modern
            and ending is not None
            and isinstance(ending.body, ApprovalRequested | TurnParked)
        ):
            view = await self.tasks.view(agent, message_id)
            if view.asked:
                return _input_required(view)
        return call_result(agent.address, ending)

    async def _asked_again(
        self, unanswered: UnansweredError
    ) -> types.CallToolResult | types.InputRequiredResult:
        """An answer the gateway refused: the same questions, each refused one saying why,
        while the turn still waits on them."""
        view = await self.tasks.view(unanswered.agent, unanswered.message_id)
        if view.asked:
            return _input_required(view, unanswered.problems)
        return failed(" ".join(unanswered.problems.values()), view.address)

    async def _resume(
        self, caller: Principal, params: types.CallToolRequestParams
    ) -> tuple[Owned, str, int, frozenset[str]]:
        """The turn a call sent again with its request state waits in, once the answers
        it carries are sent (`UnansweredError` when the gateway refused one)."""
        try:
            address, message_id = mcp_tasks.parse_task_id(params.request_state or "")
            agent = own(caller, address, "write", doing="calling an agent")
            view = await self.tasks.view(agent, message_id)
        except UnknownTaskError:
            raise ApiError(
                404, f"the request state names no turn: {params.request_state}"
            ) from None
        responses = {
            key: response.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, response in (params.input_responses or {}).items()
        }
        answered, problems = await self.tasks.answer(agent, view, responses)
        if problems:
            raise UnansweredError(agent, message_id, problems)
        return agent, message_id, view.first_seq - 1, frozenset(answered)

    async def _task_call(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """A `tools/call` that asks for a task (a 2025-11-25 `task` field) or may get one
        (the request names the extension) is answered with the task once its message is
        on the timeline, unless its kind forbids tasks; a call of a kind that requires
        one is refused without it; any other request goes on to its handler. On the
        stateless revision a kind with `input_before_task` first follows the turn's first
        round, and answers "input required" when it asks; the call sent again with the
        answers gets the task."""
        if ctx.method != "tools/call" or not await self._as_task(ctx):
            return await call_next(ctx)
        try:
            params = types.CallToolRequestParams.model_validate(ctx.params or {}, by_name=False)
        except ValidationError:
            raise MCPError(types.INVALID_PARAMS, "tools/call needs a tool name") from None
        caller = caller_of(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern and params.request_state is not None:
            return await self._answered_task(caller, params)
        try:
            sent = await self._send(caller, params.name, params.arguments or {})
        except ApiError as error:
            raise MCPError(types.INVALID_PARAMS, error.message) from None
        if isinstance(sent, types.CallToolResult):
            raise MCPError(types.INVALID_PARAMS, _text(sent))
        agent, message_id, after = sent
        spec = (await published_kinds(self.rt, caller.tenant)).get(params.name)
        if modern and spec is not None and spec.input_before_task:
            with stream_slot(self.rt, caller):
                asks = await first_round_asks(self.rt, agent, after, message_id)
            view = await self.tasks.view(agent, message_id)
            if asks and view.asked:
                return _dumped(_input_required(view))
        view = await self.tasks.placed(agent, message_id, after)
        if modern:
            return {"resultType": "task", **mcp_tasks.modern_task(view, detailed=False)}
        return {"task": mcp_tasks.legacy_task(view)}

    async def _answered_task(
        self, caller: Principal, params: types.CallToolRequestParams
    ) -> HandlerResult:
        """A call sent again with its request state and the answers: the task of the turn
        it answered, or the same questions again when an answer was refused."""
        try:
            agent, message_id, _, _ = await self._resume(caller, params)
        except UnansweredError as unanswered:
            view = await self.tasks.view(unanswered.agent, unanswered.message_id)
            if view.asked:
                return _dumped(_input_required(view, unanswered.problems))
            raise MCPError(types.INVALID_PARAMS, " ".join(unanswered.problems.values())) from None
        except ApiError as error:
            raise MCPError(types.INVALID_PARAMS, error.message) from None
        view = await self.tasks.view(agent, message_id)
        return {"resultType": "task", **mcp_tasks.modern_task(view, detailed=False)}

    async def _as_task(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether the call is answered with a task, by what the request asks and its
        kind's `task_support`; MCPError for a call the kind's support refuses."""
        wants = _wants_task(ctx)
        name = ctx.params.get("name") if isinstance(ctx.params, dict) else None
        if not isinstance(name, str):
            return wants
        spec = (await published_kinds(self.rt, caller_of(ctx).tenant)).get(name)
        support = spec.task_support if spec is not None else "optional"
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if support == "required" and not wants:
            if modern:
                raise MCPError(
                    MISSING_CAPABILITY,
                    f"the tool {name} runs only as a task: declare the extension "
                    f"{EXTENSION} in the request's capabilities",
                    {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
                )
            raise MCPError(
                types.METHOD_NOT_FOUND, f"the tool {name} runs only as a task: call it with `task`"
            )
        if support == "forbidden" and wants and not modern:
            raise MCPError(
                types.METHOD_NOT_FOUND,
                f"the tool {name} is not called as a task: call it without `task`",
            )
        return wants and support != "forbidden"

    async def _send(
        self, caller: Principal, kind: str, arguments: dict[str, Any]
    ) -> tuple[Owned, str, int] | types.CallToolResult:
        """Send the call's message: the agent, the message id and the seq to follow its
        turn from; or a tool error saying what is wrong with the input."""
        key = arguments.get("idempotency_key")
        if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY):
            return failed(f"idempotency_key: expected a string of 1 to {MAX_KEY} characters")
        call = call_id(caller.tenant, kind, key)
        address = arguments.get("agent") or new_agent(caller.tenant, "mcp", kind, call)
        if not isinstance(address, str):
            return failed("agent: expected the address of an agent, as a string")
        newest = await published_kinds(self.rt, caller.tenant)
        try:
            text = message_of(newest.get(kind), arguments)
        except InputError as error:
            return failed(str(error))
        sent = await send_to_kind(
            self.rt,
            caller,
            kind,
            address,
            text,
            idempotency_key=f"mcp {call}",
            fields=("agent", "message"),
        )
        return sent.agent, sent.message_id, sent.after


class UnansweredError(Exception):
    """Answers the gateway refused, per request id, with the sentence saying why."""

    def __init__(self, agent: Owned, message_id: str, problems: dict[str, str]) -> None:
        super().__init__(problems)
        self.agent, self.message_id, self.problems = agent, message_id, problems


def _input_required(
    view: mcp_tasks.TaskView, problems: dict[str, str] | None = None
) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {"inputRequests": input_requests(view, problems), "requestState": view.task_id}
    )


def _dumped(result: types.InputRequiredResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _wants_task(ctx: ServerRequestContext[Any, Any]) -> bool:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return mcp_tasks.client_has_extension(ctx.meta)
    return isinstance(ctx.params, dict) and ctx.params.get("task") is not None


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))
