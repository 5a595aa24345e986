"""`subscriptions/listen` for tasks (the stateless revision's Tasks extension): a client
names task ids, and the stream carries a `notifications/tasks` with the whole task each
time its status changes, then ends gracefully once every task it names has ended.

Each task is followed on its agent's timeline, as any follower of the gateway, so the
notifications are the same `tasks/get` answers a poll would get, read from the
projection. A stream is this gateway's alone: a client whose stream is cut re-listens
(or polls) on any replica and gets the task's state as it is.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, cast

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from schemas.events import Event
from services.gateway import mcp_tasks, service
from services.gateway.auth import Owned, own
from services.gateway.errors import ApiError
from services.gateway.mcp_methods import MISSING_CAPABILITY, TaskMethods, caller_of, stream_slot
from services.gateway.mcp_tasks import TERMINAL, TaskView, UnknownTaskError

MAX_TASKS = 50
"""Task ids one stream may name."""


class TaskNotificationParams(types.NotificationParams):
    model_config = types.NotificationParams.model_config | {"extra": "allow"}


class TaskNotification(types.Notification[TaskNotificationParams, str]):
    method: str = "notifications/tasks"
    params: TaskNotificationParams


class TaskListen:
    def __init__(self, tasks: TaskMethods) -> None:
        self.tasks = tasks

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen needs a request id")
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        wanted = (params.notifications.model_extra or {}).get("taskIds") or []
        if wanted and not mcp_tasks.client_has_extension(ctx.meta):
            raise MCPError(
                MISSING_CAPABILITY,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {mcp_tasks.EXTENSION: {}}}},
            )
        with stream_slot(self.tasks.rt, caller_of(ctx)):
            await self._listen(ctx, meta, await self._honored(ctx, wanted))
        return types.SubscriptionsListenResult(_meta=meta)

    async def _listen(
        self,
        ctx: ServerRequestContext[Any],
        meta: dict[str, Any],
        honored: list[tuple[Owned, str, TaskView]],
    ) -> None:
        acknowledged = types.SubscriptionsAcknowledgedNotification(
            params=types.SubscriptionsAcknowledgedNotificationParams.model_validate(
                {
                    "notifications": {"taskIds": [view.task_id for _, _, view in honored]},
                    "_meta": meta,
                }
            )
        )
        await ctx.session.send_notification(acknowledged, related_request_id=ctx.request_id)
        async with anyio.create_task_group() as group:
            for agent, message_id, view in honored:
                group.start_soon(self._watch, ctx, meta, agent, message_id, view)

    async def _honored(
        self, ctx: ServerRequestContext[Any], wanted: Any
    ) -> list[tuple[Owned, str, TaskView]]:
        """The named tasks the caller may see (another tenant's, or an unknown one, is
        left out of the acknowledgement, as an unknown resource would be)."""
        if not isinstance(wanted, list) or len(wanted) > MAX_TASKS:
            raise MCPError(
                types.INVALID_PARAMS, f"taskIds: expected a list of at most {MAX_TASKS} task ids"
            )
        honored = []
        for task_id in dict.fromkeys(t for t in wanted if isinstance(t, str)):
            try:
                address, message_id = mcp_tasks.parse_task_id(task_id)
                agent = own(caller_of(ctx), address, "read")
                honored.append((agent, message_id, await self.tasks.view(agent, message_id)))
            except (UnknownTaskError, ApiError):
                continue
        return honored

    async def _watch(
        self,
        ctx: ServerRequestContext[Any],
        meta: dict[str, Any],
        agent: Owned,
        message_id: str,
        view: TaskView,
    ) -> None:
        """One notification for the task as it stands, then one per change, to its end."""
        await self._notify(ctx, meta, view)
        if view.status in TERMINAL:
            return
        shown = (view.status, view.message)
        items = service.follow(self.tasks.rt, agent, view.first_seq - 1)
        async with aclosing(items):
            async for item in items:
                if not isinstance(item, Event):
                    continue
                view = await self.tasks.view(agent, message_id)
                if (view.status, view.message) == shown:
                    continue
                shown = (view.status, view.message)
                await self._notify(ctx, meta, view)
                if view.status in TERMINAL:
                    return

    async def _notify(
        self, ctx: ServerRequestContext[Any], meta: dict[str, Any], view: TaskView
    ) -> None:
        task = mcp_tasks.modern_task(view, detailed=True)
        note = TaskNotification(
            params=TaskNotificationParams.model_validate({**task, "_meta": meta})
        )
        sent = cast("types.ServerNotification", note)
        await ctx.session.send_notification(sent, related_request_id=ctx.request_id)
