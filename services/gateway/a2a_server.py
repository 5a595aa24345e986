"""teaspill as A2A agents: each published kind of the key's tenant is an agent of the
agent-to-agent protocol, served through the `a2a-sdk`'s JSON-RPC transport.

- `GET /a2a`: the key's tenant's kinds, each with its card's URL;
- `GET /a2a/{kind}/.well-known/agent-card.json`: the kind's card, whose security scheme
  is the gateway's API keys;
- `POST /a2a/{kind}`: JSON-RPC, with A2A 1.0's method names and v0.3's (`message/send`,
  `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`).

The key is checked by the gateway's own middleware before any of this is read (401), and
the tenant and scope of every address and task by `auth.own`, as on every route. A message
goes through the same pieces as an MCP call (`turns`): sent to the agent its `contextId`
names or to a new agent of the kind, then the turn it started is followed on the
timeline. A task is that turn, the same task as the MCP server's (`a2a_tasks`): its id
names the agent and the message, so any gateway process reads it from the projection, and
cancelling it is a stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing, contextmanager
from typing import Any, cast

from a2a.server.context import ServerCallContext
from a2a.server.events import Event as StreamEvent
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from schemas.events import Event
from schemas.tenant import Scope
from services.gateway.a2a_card import card_of, kinds
from services.gateway.a2a_tasks import TERMINAL, TurnStream, state, task, view_of
from services.gateway.auth import A2A, PRINCIPAL, Owned, Principal, own
from services.gateway.errors import ApiError, error_response
from services.gateway.mcp_tasks import UnknownTaskError, parse_task_id, task_id
from services.gateway.runtime import Runtime
from services.gateway.turns import MessageSent, call_id, follow_turn, new_agent, send_to_kind

PLACE_WAIT = 2.0
"""Seconds a `returnImmediately` send waits for the timeline to name its message: at once
when the agent takes it, but a message sent while a turn runs waits in the agent's inbox,
unrecorded, until that wake ends; then the task is answered submitted."""
CANCEL_WAIT = 10.0
"""Seconds a cancel waits for the turn to end `stopped` before it answers with the task
as it stands (the stop is already held by Restate: the end follows)."""
_KIND = "teaspill.kind"


class _Caller(DefaultServerCallContextBuilder):
    """The SDK's context, with the key the middleware checked and the kind of the URL."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[PRINCIPAL] = request.scope.get(PRINCIPAL)
        context.state[_KIND] = request.path_params.get("kind", "")
        return context


def _caller(context: ServerCallContext) -> Principal:
    found = context.state.get(PRINCIPAL)
    if not isinstance(found, Principal):
        raise InvalidRequestError("missing API key: send 'Authorization: Bearer <key>'")
    return found


@contextmanager
def _spoken() -> Iterator[None]:
    """The gateway's sentences, as the A2A errors a client tells apart."""
    try:
        yield
    except ApiError as error:
        raise _a2a_error(error) from error


def _a2a_error(error: ApiError) -> A2AError:
    data = {"status": error.status}
    if error.status in {400, 404, 409, 413, 422}:
        return InvalidParamsError(error.message, data)
    if error.status < 500:
        return InvalidRequestError(error.message, data)
    return InternalError(error.message, data)


class Tasks(RequestHandler):
    """The A2A methods, as the gateway's service calls."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        """The task once its turn ended or waits for a person; with `returnImmediately`,
        once the timeline names its message, or after `PLACE_WAIT` as submitted."""
        wait = PLACE_WAIT if params.configuration.return_immediately else None
        # a send that waits for the turn's end holds the request open as a stream does
        with _spoken(), self._slot(context) if wait is None else contextlib.nullcontext():
            sent = await self._send(params.message, context)
            stream = TurnStream(sent.agent.address, sent.message_id, sent.story)
            following = follow_turn(self.rt, sent.agent, sent.after, sent.message_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait), aclosing(following) as items:
                    async for item in items:
                        stream.take(item)
                        if stream.done() or (wait and stream.view):
                            break
            if stream.view is None and wait:
                return stream.first()
            if stream.view is None:
                raise InternalError(
                    f"the gateway stopped following agent {sent.agent.address} before it "
                    f"took the message; read task {stream.task_id} later with tasks/get"
                )
            return await self._read(sent.agent, sent.message_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent]:
        with self._slot(context):
            with _spoken():
                sent = await self._send(params.message, context)
                stream = TurnStream(sent.agent.address, sent.message_id, sent.story)
            async for shown in self._follow(stream, sent.agent, sent.after):
                yield shown

    @contextmanager
    def _slot(self, context: ServerCallContext) -> Iterator[None]:
        """One of the key's stream slots while a request waits on a turn."""
        with _spoken():
            release = self.rt.streams.hold(_caller(context).key_id)
        try:
            yield
        finally:
            release()

    async def _send(self, message: Message, context: ServerCallContext) -> MessageSent:
        caller = _caller(context)
        kind = str(context.state.get(_KIND, ""))
        if message.task_id:
            raise InvalidParamsError(
                "message.taskId: a task is one turn and takes no further messages; send the "
                "message with contextId (the agent's address) to continue the conversation"
            )
        # The key's id is part of it: two callers that number their messages alike (a
        # messageId of "1") never share an agent or a message.
        given = f"{caller.key_id} {message.message_id}" if message.message_id else None
        call = call_id(caller.tenant, kind, given)
        address = message.context_id or new_agent(caller.tenant, "a2a", kind, call)
        return await send_to_kind(
            self.rt,
            caller,
            kind,
            address,
            _text(message),
            idempotency_key=f"a2a {call}",
            fields=("contextId", "message"),
        )

    async def _stream(self, agent: Owned, message_id: str) -> TurnStream:
        story = await self._story(agent, message_id)
        return TurnStream(agent.address, message_id, story)

    async def _follow(
        self, stream: TurnStream, agent: Owned, after: int
    ) -> AsyncGenerator[StreamEvent]:
        """The stream's first task, then what the turn does until it ends or waits."""
        yield stream.first()
        if stream.done():
            return
        async with aclosing(follow_turn(self.rt, agent, after, stream.message_id)) as items:
            async for item in items:
                for shown in stream.take(item):
                    yield shown
                if stream.done():
                    return

    async def _story(self, agent: Owned, message_id: str) -> list[Event]:
        address = agent.address
        return await self.rt.projection.read(lambda store: store.message_story(address, message_id))

    async def _read(self, agent: Owned, message_id: str, history: bool = True) -> Task:
        """The task as the projection shows it."""
        story = await self._story(agent, message_id)
        view = view_of(agent.address, message_id, story)
        if view is None:
            raise _no_task(task_id(agent.address, message_id))
        turn: list[Event] = []
        if view.started is not None:
            number = view.started.turn
            turn = await self.rt.projection.read(lambda store: store.turn(agent.address, number))
        return task(view, story, turn, history)

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        agent, message_id = self._named(params.id, context, "read")
        with _spoken():
            return await self._read(agent, message_id, params.history_length != 0)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        """Cancelling is stopping the task's turn, as `POST /v1/agents/{address}/stop`; the
        task is answered once the turn ended, or after `CANCEL_WAIT` as it stands."""
        agent, message_id = self._named(params.id, context, "write")
        with _spoken():
            story = await self._story(agent, message_id)
            view = view_of(agent.address, message_id, story)
            if view is None:
                raise _no_task(params.id)
            if state(view) in TERMINAL:
                raise TaskNotCancelableError(f"task {params.id} has ended: {view.message}")
            if view.started is None:
                raise TaskNotCancelableError(
                    f"task {params.id} has not started ({view.message}); cancel it once it runs"
                )
            turn = view.started.turn
            await self.rt.ingress.stop(agent.address, f"a2a cancel {params.id}", turn)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CANCEL_WAIT):
                    await _until_end(self.rt, agent, view.started.seq - 1, message_id)
            return await self._read(agent, message_id)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent]:
        agent, message_id = self._named(params.id, context, "read")
        with self._slot(context):
            with _spoken():
                stream = await self._stream(agent, message_id)
            if stream.view is None:
                raise _no_task(params.id)
            async for shown in self._follow(stream, agent, stream.view.first_seq - 1):
                yield shown

    def _named(self, text: str, context: ServerCallContext, needed: Scope) -> tuple[Owned, str]:
        """The agent and the message a task id names, if the key may see them: another
        tenant's task is not found, like one that never was."""
        try:
            address, message_id = parse_task_id(text)
            return own(_caller(context), address, needed, doing="cancelling a task"), message_id
        except UnknownTaskError:
            raise _no_task(text) from None
        except ApiError as error:
            if error.status in {400, 404}:
                raise _no_task(text) from None
            raise _a2a_error(error) from error

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(_NOT_OFFERED.format("listing tasks"))

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise UnsupportedOperationError(_NOT_OFFERED.format("push notifications"))

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise UnsupportedOperationError(_NOT_OFFERED.format("push notifications"))

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise UnsupportedOperationError(_NOT_OFFERED.format("push notifications"))

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise UnsupportedOperationError(_NOT_OFFERED.format("push notifications"))

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(_NOT_OFFERED.format("an extended card"))


def _no_task(text: str) -> TaskNotFoundError:
    return TaskNotFoundError(
        f"there is no task {text} for this key: no agent timeline of its tenant names its "
        "message (one sent while a turn runs is named when the agent takes it)"
    )


async def _until_end(rt: Runtime, agent: Owned, after: int, message_id: str) -> None:
    async with aclosing(follow_turn(rt, agent, after, message_id)) as items:
        async for _ in items:
            pass


_NOT_OFFERED = (
    "{} is not offered: follow a task with message/stream or tasks/resubscribe, and read "
    "it with tasks/get"
)


def _text(message: Message) -> str | None:
    """The message's text parts, joined; None when it has a part of another kind."""
    if any(part.WhichOneof("content") != "text" for part in message.parts):
        raise InvalidParamsError("message.parts: only text parts are accepted")
    return "".join(part.text for part in message.parts) or None


def routes(rt: Runtime) -> list[BaseRoute]:
    """The A2A routes of one gateway app."""

    async def index(request: Request) -> Response:
        return JSONResponse({"agents": await kinds(rt, _principal(request), _base(request))})

    async def card(request: Request) -> Response:
        kind = str(request.path_params["kind"])
        try:
            found = await card_of(rt, _principal(request), kind, _base(request))
        except ApiError as error:
            return error_response(error)
        return JSONResponse(agent_card_to_dict(found))

    handler = Tasks(rt)
    rpc = create_jsonrpc_routes(
        handler, f"{A2A}/{{kind}}", context_builder=_Caller(), enable_v0_3_compat=True
    )
    return [
        Route(A2A, index, methods=["GET"]),
        Route(f"{A2A}/{{kind}}/.well-known/agent-card.json", card, methods=["GET"]),
        *cast(list[BaseRoute], rpc),
    ]


def _principal(request: Request) -> Principal:
    found: Any = request.scope.get(PRINCIPAL)
    assert isinstance(found, Principal), "the auth middleware runs before every A2A route"
    return found


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")
