"""The `tasks/*` methods of the gateway's MCP server: each reads the task from the
agent's timeline (`mcp_tasks`), checked against the caller's key like any address, so
another tenant's task is answered exactly like one that does not exist."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import HEADER_MISMATCH
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from schemas.events import (
    ApprovalAnswered,
    ApprovalRefused,
    ApprovalRequested,
    Event,
    MessageQueued,
    MessageRejected,
    TurnEnded,
    TurnParked,
    TurnStarted,
)
from schemas.tenant import Scope as KeyScope
from services.gateway import mcp_answers, mcp_tasks, service
from services.gateway.auth import PRINCIPAL, Owned, Principal, own
from services.gateway.errors import ApiError
from services.gateway.mcp_tasks import RELATED, TERMINAL, TaskView, UnknownTaskError
from services.gateway.runtime import Runtime
from services.gateway.turns import follow_turn

MISSING_CAPABILITY = -32021
CANCEL_PATIENCE = 30.0
"""Seconds a 2025-11-25 `tasks/cancel` waits for the stopped turn to end."""
ANSWER_PATIENCE = 10.0
"""Seconds answers wait to be applied by the agent before their request is answered."""


class UpdateTaskParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] = Field(default_factory=dict)


class TaskMethods:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def register(self, server: Server[Any]) -> None:
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self._get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self._result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self._cancel)
        server.add_request_handler("tasks/update", UpdateTaskParams, self._update)

    async def view(self, agent: Owned, message_id: str) -> TaskView:
        story = await self.rt.projection.read(
            lambda store: store.message_story(agent.address, message_id)
        )
        return mcp_tasks.task_view(agent.address, message_id, story)

    async def placed(self, agent: Owned, message_id: str, after: int) -> TaskView:
        """The task once its message is on the timeline (its turn started, or it queued),
        so a `tasks/get` for it resolves as soon as the client has its id."""
        items = service.follow(self.rt, agent, after)
        try:
            async for item in items:
                if isinstance(item, Event) and _names(item, message_id):
                    break
        finally:
            await items.aclose()
        return await self.view(agent, message_id)

    async def _task(
        self, ctx: ServerRequestContext[Any], task_id: str, needed: KeyScope
    ) -> tuple[Owned, str, TaskView]:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern and not mcp_tasks.client_has_extension(ctx.meta):
            raise MCPError(
                MISSING_CAPABILITY,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {mcp_tasks.EXTENSION: {}}}},
            )
        if modern:
            _routed_to(ctx, task_id)
        try:
            address, message_id = mcp_tasks.parse_task_id(task_id)
            agent = own(caller_of(ctx), address, needed, doing="this task method")
            return agent, message_id, await self.view(agent, message_id)
        except (UnknownTaskError, ApiError) as error:
            if isinstance(error, ApiError) and error.status == 403:
                raise MCPError(types.INVALID_PARAMS, error.message) from None
            raise MCPError(types.INVALID_PARAMS, f"there is no task {task_id}") from None

    async def _get(
        self, ctx: ServerRequestContext[Any], params: types.GetTaskRequestParams
    ) -> dict[str, Any]:
        _, _, view = await self._task(ctx, params.task_id, "read")
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return mcp_tasks.modern_task(view, detailed=True)
        return mcp_tasks.legacy_task(view)

    async def _result(
        self, ctx: ServerRequestContext[Any], params: types.GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        """The call's result once the turn ends (or waits for a person): the request
        waits as long as the turn runs. The stateless revision has no such method (its
        `tasks/get` carries the result), so there it is an unknown method."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(
                types.METHOD_NOT_FOUND,
                f"tasks/result is not a method of revision {ctx.protocol_version}: "
                "tasks/get gives a task's result once it ended",
            )
        agent, message_id, view = await self._task(ctx, params.task_id, "read")
        ending = view.ending
        result = mcp_tasks.view_result(view)
        if result is None:
            with stream_slot(self.rt, agent.caller):
                ending = await turn_end(self.rt, agent, view.first_seq - 1, message_id)
            result = mcp_tasks.call_result(view.address, ending)
        if (ended := mcp_tasks.broke(ending)) is not None:
            raise MCPError(*mcp_tasks.failure(view.address, ended))
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        dumped["_meta"] = {RELATED: {"taskId": view.task_id}}
        return dumped

    async def _cancel(
        self, ctx: ServerRequestContext[Any], params: types.CancelTaskRequestParams
    ) -> dict[str, Any]:
        """Cancelling is stopping the task's turn, as `POST /v1/agents/{address}/stop`. On
        2025-11-25 the answer is the task once its turn ended, or as it stands after
        `CANCEL_PATIENCE` (the stop stays with Restate, and takes effect when it can)."""
        agent, message_id, view = await self._task(ctx, params.task_id, "write")
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if view.status in TERMINAL:
            if modern:
                return {}
            raise MCPError(
                types.INVALID_PARAMS, f"task {view.task_id} already ended: {view.message}"
            )
        if view.started is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"task {view.task_id} has not started ({view.message}); cancel it once it runs",
            )
        turn = view.started.turn
        await self.rt.ingress.stop(agent.address, f"mcp cancel {view.task_id}", turn)
        if modern:
            return {}
        with anyio.move_on_after(CANCEL_PATIENCE):
            await turn_end(self.rt, agent, view.started.seq - 1, message_id, until_end=True)
        return mcp_tasks.legacy_task(await self.view(agent, message_id))

    async def _update(
        self, ctx: ServerRequestContext[Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        """Answers to the approvals the turn waits on, as the responses to the
        elicitations `tasks/get` showed (`mcp_answers`). Anything else, or a key the turn
        does not wait on, is ignored; an answer the gateway refuses is an error with its
        sentence, and the approval still waits."""
        agent, _, view = await self._task(ctx, params.task_id, "write")
        _, problems = await self.answer(agent, view, params.input_responses)
        if problems:
            raise MCPError(types.INVALID_PARAMS, " ".join(problems.values()))
        return {}

    async def answer(
        self, agent: Owned, view: TaskView, responses: dict[str, Any]
    ) -> tuple[set[str], dict[str, str]]:
        """Send the answer the responses give to each approval the turn waits on: the
        request ids answered, and per request the gateway refused, the sentence why."""
        answered: set[str] = set()
        problems: dict[str, str] = {}
        after = view.first_seq - 1
        for asked in view.asked:
            answer = mcp_answers.answer_of(asked, responses)
            if answer is None:
                continue
            try:
                accepted = await service.answer(self.rt, agent, asked.request_id, answer)
            except ApiError as error:
                if error.status >= 500:
                    raise MCPError(types.INTERNAL_ERROR, error.message) from None
                problems[asked.request_id] = error.message
            else:
                answered.add(asked.request_id)
                after = max(after, accepted.after_seq)
        if answered:
            await self.applied(agent, after, set(answered))
        return answered, problems

    async def applied(self, agent: Owned, after: int, requests: set[str]) -> None:
        """Until the timeline after `after` shows each of `requests` answered (or the answer
        refused), so that a `tasks/get` after the acknowledgement sees it; at most
        `ANSWER_PATIENCE` seconds (an answer Restate holds is applied when the agent runs,
        however late)."""
        with anyio.move_on_after(ANSWER_PATIENCE):
            async with aclosing(service.follow(self.rt, agent, after)) as items:
                async for item in items:
                    body = item.body if isinstance(item, Event) else None
                    if isinstance(body, ApprovalAnswered | ApprovalRefused):
                        requests.discard(body.request_id)
                    if not requests:
                        return


def _routed_to(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """An `Mcp-Name` header on a task method names the task its `taskId` does (it routes
    the request as it does a tool call by the tool's name); one that differs is refused."""
    header = ctx.request.headers.get(MCP_NAME_HEADER) if ctx.request is not None else None
    if header is not None and decode_header_value(header) != task_id:
        raise MCPError(
            HEADER_MISMATCH,
            f"the {MCP_NAME_HEADER} header does not match the request's taskId",
        )


def _names(event: Event, message_id: str) -> bool:
    body = event.body
    named = TurnStarted | MessageQueued | MessageRejected
    return isinstance(body, named) and body.message_id == message_id


async def turn_end(
    rt: Runtime,
    agent: Owned,
    after: int,
    message_id: str,
    *,
    until_end: bool = False,
    answered: frozenset[str] = frozenset(),
) -> Event | None:
    """The event that ends the turn `message_id` started (or the `message_rejected` of a
    message that started none), or that makes it wait for a person (unless `until_end`) on
    a request not in `answered`; None if the gateway stopped following first."""
    async with aclosing(follow_turn(rt, agent, after, message_id)) as items:
        async for item in items:
            if isinstance(item, Event) and _ends(item.body, until_end, answered):
                return item
    return None


async def first_round_asks(rt: Runtime, agent: Owned, after: int, message_id: str) -> bool:
    """Whether the turn `message_id` starts asks the caller something in its first round:
    followed until it asks, ends, or goes on to a second round (or the gateway stops
    following, which counts as not asking)."""
    async with aclosing(follow_turn(rt, agent, after, message_id)) as items:
        async for item in items:
            if not isinstance(item, Event):
                continue
            if isinstance(item.body, ApprovalRequested | TurnParked):
                return True
            if isinstance(item.body, TurnEnded | MessageRejected) or item.round > 1:
                return False
    return False


def _ends(body: object, until_end: bool, answered: frozenset[str]) -> bool:
    if isinstance(body, TurnEnded | MessageRejected):
        return True
    if until_end or not isinstance(body, ApprovalRequested | TurnParked):
        return False
    return body.request_id not in answered


@contextmanager
def stream_slot(rt: Runtime, caller: Principal) -> Iterator[None]:
    """One of the key's stream slots while a request waits on a turn; past the cap the
    request is refused with the sentence, before it waits or sends anything."""
    try:
        release = rt.streams.hold(caller.key_id)
    except ApiError as error:
        raise MCPError(types.INVALID_REQUEST, error.message, {"status": error.status}) from None
    try:
        yield
    finally:
        release()


def caller_of(ctx: ServerRequestContext[Any]) -> Principal:
    found = ctx.request.scope.get(PRINCIPAL) if ctx.request is not None else None
    if not isinstance(found, Principal):
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'")
    return found
