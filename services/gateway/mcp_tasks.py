"""MCP Tasks for teaspill turns: what a task is, read from the timeline alone.

A task is one turn. Its id is the agent's address and the id of the message that starts
the turn (`address/message_id`), and that message id is on the turn's `turn_started`
(and on its `message_queued` while it waits behind another turn), so the task's state is
a pure function of the agent's timeline: nothing is kept in any process, and a task
stays pollable through a restart of the gateway, the endpoint or Restate.

Two wire forms are spoken, chosen by the request's protocol revision: the Tasks of the
2025-11-25 revision (a `task` field on `tools/call`; `tasks/get`, `tasks/result`,
`tasks/cancel`) and the `io.modelcontextprotocol/tasks` extension of the stateless
revisions (`resultType: "task"`, the result inline in `tasks/get`, `tasks/update`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from mcp import types

from schemas.events import (
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    MessageQueued,
    MessageRejected,
    TurnEnded,
    TurnParked,
    TurnStarted,
)
from services.gateway import mcp_answers

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
INTERNAL_ERROR = types.INTERNAL_ERROR
"""The JSON-RPC code of a turn whose step could not run (`broke`)."""
POLL_MS = 1000
"""The polling interval suggested to clients."""

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class UnknownTaskError(ValueError):
    """A task id that names no turn this caller may see."""


def task_id(address: str, message_id: str) -> str:
    return f"{address}/{message_id}"


def parse_task_id(text: str) -> tuple[str, str]:
    """The address and the message id; `UnknownTaskError` when it has not that form."""
    address, slash, message_id = text.partition("/")
    if not slash or not address or not message_id or "/" in message_id:
        raise UnknownTaskError(text)
    return address, message_id


@dataclass(frozen=True)
class TaskView:
    task_id: str
    address: str
    status: Status
    message: str
    created_at: datetime
    updated_at: datetime
    first_seq: int
    """The seq of the first event naming the message: a follower of the turn starts there."""
    started: Event | None
    """The turn's `turn_started`; None while the message waits behind another turn."""
    ending: Event | None
    """The `turn_ended`, once the turn ended; or the `message_rejected` of a message the
    agent refused, which started no turn."""
    asked: tuple[ApprovalRequested, ...]
    """The approval requests the turn waits on."""


def task_view(address: str, message_id: str, story: list[Event]) -> TaskView:
    """The task of message `message_id` from `ProjectionStore.message_story`."""
    named = [e for e in story if _names(e, message_id)]
    if not named:
        raise UnknownTaskError(task_id(address, message_id))
    started = next((e for e in named if isinstance(e.body, TurnStarted)), None)
    ends = TurnEnded if started is not None else MessageRejected
    ending = next((e for e in story if isinstance(e.body, ends)), None)
    asked = _pending(story)
    status, message = _status(address, started, ending, asked)
    return TaskView(
        task_id=task_id(address, message_id),
        address=address,
        status=status,
        message=message,
        created_at=named[0].at,
        updated_at=max(e.at for e in story),
        first_seq=named[0].seq,
        started=started,
        ending=ending,
        asked=asked,
    )


def _names(event: Event, message_id: str) -> bool:
    body = event.body
    named = TurnStarted | MessageQueued | MessageRejected
    return isinstance(body, named) and body.message_id == message_id


def _pending(story: list[Event]) -> tuple[ApprovalRequested, ...]:
    asked: dict[str, ApprovalRequested] = {}
    for event in story:
        body = event.body
        if isinstance(body, ApprovalRequested):
            asked[body.request_id] = body
        elif isinstance(body, ApprovalAnswered | ApprovalAbandoned):
            asked.pop(body.request_id, None)
    return tuple(asked.values())


def _status(
    address: str,
    started: Event | None,
    ending: Event | None,
    asked: tuple[ApprovalRequested, ...],
) -> tuple[Status, str]:
    if ending is not None:
        return _ended(address, ending)
    if started is None:
        return "working", f"the message waits behind the turn in progress of agent {address}"
    if asked:
        names = ", ".join(f"{a.request_id} (tool {a.name})" for a in asked)
        return "input_required", f"the turn waits for a person to answer approval {names}"
    return "working", f"turn {started.turn} of agent {address} is running"


def _ended(address: str, ending: Event) -> tuple[Status, str]:
    """The status of a turn that ended, or of a message the agent refused (the call's
    result is then a tool error with the agent's sentence, as for a turn that could not
    finish)."""
    body = ending.body
    if isinstance(body, MessageRejected):
        return "completed", rejection(address, body)
    assert isinstance(body, TurnEnded), "a task ends with its turn or its message's refusal"
    if body.outcome == "stopped":
        return "cancelled", body.reason or "the turn was stopped"
    if broke(ending) is not None:
        return "failed", body.reason or "the turn failed"
    return "completed", f"the turn ended {body.outcome}"


def call_result(address: str, ending: Event | None) -> types.CallToolResult:
    """What a call answers for a turn's end, or for a turn that waits for a person."""
    body = ending.body if ending is not None else None
    if isinstance(body, TurnEnded) and body.outcome == "succeeded":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=body.reply)],
            structured_content={"agent": address, "reply": body.reply},
        )
    if isinstance(body, TurnEnded):
        return failed(body.reason or f"the turn ended {body.outcome}", address)
    if isinstance(body, MessageRejected):
        return failed(rejection(address, body), address)
    if isinstance(body, ApprovalRequested | TurnParked):
        return waiting(address, body.request_id)
    return failed(
        f"the gateway stopped following agent {address} before its turn ended; "
        f"read GET /v1/agents/{address}/timeline for the rest",
        address,
    )


def rejection(address: str, body: MessageRejected) -> str:
    """The agent's sentence for a message it refused."""
    return body.message or f"agent {address} refused the message: no turn started"


def broke(ending: Event | None) -> TurnEnded | None:
    """The ending of a turn that failed because a step it needed could not run (its model,
    after every fallback; its spec): a protocol failure, answered as a JSON-RPC error with
    the turn's sentence (`failure`), never as a result. A turn that failed within its own
    limits is a tool error, like any other ending that is not a reply."""
    body = ending.body if ending is not None else None
    if isinstance(body, TurnEnded) and body.outcome == "failed" and body.failed_by == "step":
        return body
    return None


def failure(address: str, ended: TurnEnded) -> tuple[int, str, dict[str, Any]]:
    """The JSON-RPC error of a turn that `broke`: code, message and data."""
    return INTERNAL_ERROR, ended.reason or "the turn failed", {"agent": address}


def view_result(view: TaskView) -> types.CallToolResult | None:
    """The call's result as the task stands: None while its turn runs."""
    if view.ending is not None:
        return call_result(view.address, view.ending)
    if view.asked:
        return waiting(view.address, view.asked[0].request_id)
    return None


def waiting(address: str, request_id: str) -> types.CallToolResult:
    return failed(
        f"the turn of agent {address} waits for a person to answer approval request "
        f"{request_id}: answer it with POST /v1/agents/{address}/approvals/{request_id}",
        address,
    )


def failed(sentence: str, address: str | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=sentence)],
        structured_content={"agent": address} if address else None,
        is_error=True,
    )


# --- wire forms -------------------------------------------------------------------------


def _stamp(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def legacy_task(view: TaskView) -> dict[str, Any]:
    """The 2025-11-25 `Task`."""
    return {
        "taskId": view.task_id,
        "status": view.status,
        "statusMessage": view.message,
        "createdAt": _stamp(view.created_at),
        "lastUpdatedAt": _stamp(view.updated_at),
        "ttl": None,
        "pollInterval": POLL_MS,
    }


def modern_task(view: TaskView, *, detailed: bool) -> dict[str, Any]:
    """The extension's `Task`; `detailed` inlines the result or the input requests, as
    `tasks/get` answers."""
    task: dict[str, Any] = {
        "taskId": view.task_id,
        "status": view.status,
        "statusMessage": view.message,
        "createdAt": _stamp(view.created_at),
        "lastUpdatedAt": _stamp(view.updated_at),
        "ttlMs": None,
        "pollIntervalMs": POLL_MS,
    }
    if detailed and view.status == "completed":
        result = call_result(view.address, view.ending)
        task["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    ended = broke(view.ending)
    if detailed and ended is not None:
        code, message, data = failure(view.address, ended)
        task["error"] = {"code": code, "message": message, "data": data}
    if detailed and view.status == "input_required":
        task["inputRequests"] = input_requests(view)
    return task


def input_requests(view: TaskView, problems: dict[str, str] | None = None) -> dict[str, Any]:
    """Each approval the turn waits on as the elicitations that answer it (`mcp_answers`),
    keyed by its request id (or by the request id and the key of each question it asks)."""
    return mcp_answers.input_requests(view.address, view.asked, problems)


def client_has_extension(meta: Any) -> bool:
    """Whether the request's own capabilities (2026-07-28 `_meta`) name the extension."""
    if not isinstance(meta, dict):
        return False
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions
