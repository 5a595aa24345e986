"""AG-UI: `POST /v1/agui` runs a turn for an AG-UI client and streams it as AG-UI events.

The thread is the agent's address. The run sends the input's last user message as a
message, with the input's `tools` as the tools that run in the page (or, with `resume`
entries, the answers to the approvals the previous run ended on; or, when the input ends
with `tool` messages, their contents as the results of the page's tools the previous run
ended on: claimed and posted as a page does, under the page id `agui`) through the
gateway's service layer, as the JSON routes do, then follows the agent's
timeline there and translates what it is given (`agui.Run`). Its turn is the one whose
`turn_started` carries the id the gateway gave its message. Keys, scopes and tenants are
checked as on every route: sending needs a write key; a history-only run, a read key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, TypeVar

from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolMessage,
)
from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from schemas.events import ApprovalRequested
from schemas.tenant import Scope
from services.gateway import pages, service
from services.gateway.agui import Run, parse_call_id, snapshot, sse
from services.gateway.auth import Owned, Principal, own, principal
from services.gateway.errors import ApiError, validation_message
from services.gateway.models import ApprovalIn, MessageIn, PageClaimIn, PageResultIn
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime
from services.gateway.sse import HeldStream

M = TypeVar("M", MessageIn, ApprovalIn, PageResultIn)
AGUI_PAGE = "agui"
"""The page id the route claims and answers page tool calls under (bound, as every page
id, to the key and end user that present it)."""
router = APIRouter(tags=["ag-ui"])
Rt = Annotated[Runtime, Depends(runtime)]
STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "AG-UI events as Server-Sent Events (`data: <event JSON>`).",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


@router.post(
    "/v1/agui",
    response_class=StreamingResponse,
    responses={**STREAM, **errors(400, 401, 403, 404, 409, 413, 422, 429, 503)},
)
async def run_agent(
    run: RunAgentInput, caller: Annotated[Principal, Depends(principal)], rt: Rt
) -> StreamingResponse:
    """Run the thread's agent on the input's last user message, with the input's `tools`
    as tools that run in the page (or resume it with the answers in `resume`, or with the
    results of its page tools in the `tool` messages the input ends with) and stream the
    turn as AG-UI events. `forwardedProps.kind` names
    the spec kind that creates a new agent; `forwardedProps.history: true` (or an input
    whose last message is not a user's) sends a `MESSAGES_SNAPSHOT` of the agent's history first."""
    text = last_user_text(run)
    props = run.forwarded_props if isinstance(run.forwarded_props, dict) else {}
    acting = bool(run.resume) or text is not None or bool(tool_results(run))
    needed: Scope = "write" if acting else "read"
    agent = own(caller, run.thread_id, needed, doing="this run", field="threadId")
    if not acting:
        await service.known(rt, agent.address)
    release = rt.streams.hold(caller.key_id)
    try:
        start, turn, mid = await _act(run, agent, rt, text, props.get("kind"))
    except BaseException:
        release()
        raise
    history = bool(props.get("history")) or not acting
    answering = tuple(entry.interrupt_id for entry in run.resume or ())
    translate = Run(agent.address, run.thread_id, run.run_id, mid, turn, answering=answering)
    body = _stream(rt, agent, run, translate, start=start if acting else None, history=history)
    return HeldStream(body, release)


def tool_results(run: RunAgentInput) -> list[ToolMessage]:
    """The `tool` messages the input ends with: results of the page's tools."""
    trailing: list[ToolMessage] = []
    for message in reversed(run.messages):
        if not isinstance(message, ToolMessage):
            break
        trailing.append(message)
    return trailing[::-1]


def last_user_text(run: RunAgentInput) -> str | None:
    """The new message: the text of the input's last message, when a person wrote it."""
    if not run.messages or run.messages[-1].role != "user":
        return None
    content: Any = getattr(run.messages[-1], "content", "")
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") for part in content)


async def _act(
    run: RunAgentInput, agent: Owned, rt: Rt, text: str | None, kind: object
) -> tuple[int, int | None, str]:
    """Send the message or the answers: where to follow from, the turn if known, and the
    message's id if one was sent."""
    if run.resume:
        row = await service.known(rt, agent.address)
        for entry in run.resume:
            answer = _approval(entry.status, entry.payload)
            await service.answer(rt, agent, entry.interrupt_id, answer)
        return (row.last_seq, row.turn, "") if row else (0, None, "")
    results = tool_results(run)
    if results:
        return await _page_results(rt, agent, results)
    if text is None:
        return 0, None, ""
    tools = [{"name": t.name, "description": t.description, "parameters": t.parameters}
             for t in run.tools or ()]  # fmt: skip
    message = _valid(MessageIn, {"text": text, "kind": kind, "page_tools": tools or None})
    key = f"agui {run.run_id}"[:200]
    accepted = await service.send(rt, agent, message, key)
    return accepted.after_seq, None, accepted.message_id


async def _page_results(
    rt: Rt, agent: Owned, results: list[ToolMessage]
) -> tuple[int, int | None, str]:
    """Claim and post each result for the page tool call it names, as the page `agui`;
    the turn they belong to goes on. A call that is not one of the thread's waiting page
    calls is 404; one this caller posted already, or another page claimed, is 409."""
    row = await service.known(rt, agent.address)
    turn: int | None = None
    for result in results:
        request_id, turn = await _page_request(rt, agent, result.tool_call_id)
        await pages.claim(rt, agent, request_id, PageClaimIn(page=AGUI_PAGE))
        content = result.content or result.error or ""
        status = "error" if result.error else "ok"
        posted = _valid(PageResultIn, {"page": AGUI_PAGE, "content": content, "status": status})
        await pages.result(rt, agent, request_id, posted)
    return (row.last_seq if row else 0), turn, ""


async def _page_request(rt: Rt, agent: Owned, tool_call_id: str) -> tuple[str, int]:
    """The request and turn of the page tool call `tool_call_id` names (`agui.call_id`)."""
    missing = ApiError(
        404, f"thread {agent.address} has no call of a page tool {tool_call_id!r} to answer"
    )
    parsed = parse_call_id(tool_call_id)
    if parsed is None:
        raise missing
    turn, round_, call = parsed
    events = await rt.projection.read(lambda store: store.turn(agent.address, turn))
    for event in events:
        body = event.body
        if (
            isinstance(body, ApprovalRequested)
            and body.page
            and event.round == round_
            and body.call_id == call
        ):
            return body.request_id, turn
    raise missing


def _approval(status: str, payload: object) -> ApprovalIn:
    answer = payload if isinstance(payload, dict) else {"approve": payload is True}
    if status != "resolved":
        answer = {"approve": False, "note": "The request was cancelled."}
    fields = {"approve": answer.get("approve"), "note": answer.get("note", "")}
    if status == "resolved" and "answers" in answer:
        fields["answers"] = answer["answers"]
    return _valid(ApprovalIn, fields)


def _valid(model: type[M], data: dict[str, Any]) -> M:
    clean = {k: v for k, v in data.items() if v is not None}
    try:
        return model.model_validate(clean)
    except ValidationError as error:
        raise ApiError(*validation_message(error.errors())) from error


async def _stream(
    rt: Runtime, agent: Owned, run: RunAgentInput, turn: Run, *, start: int | None, history: bool
) -> AsyncIterator[bytes]:
    yield sse(RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
    if history:
        yield sse(snapshot(agent.address, await service.history(rt, agent)))
    if start is None:
        yield sse(RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id))
        return
    async for event in _follow(rt, agent, turn, start):
        yield sse(event)


async def _follow(rt: Runtime, agent: Owned, turn: Run, start: int) -> AsyncIterator[BaseEvent]:
    items = service.follow(rt, agent, start)
    try:
        async for item in items:
            if isinstance(item, str):
                continue
            for event in turn.take(item):
                if turn.finished and turn.retracted and _is_last(event):
                    yield snapshot(agent.address, await service.history(rt, agent))
                yield event
            if turn.finished:
                return
    finally:
        await items.aclose()
    yield RunErrorEvent(
        message="the gateway stopped following the agent before the turn ended; "
        "run again with the same thread to see the rest",
        code="interrupted",
    )


def _is_last(event: BaseEvent) -> bool:
    return isinstance(event, RunFinishedEvent | RunErrorEvent)
