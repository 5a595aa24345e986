"""Timelines: a JSON page after a seq, and the live SSE stream."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse

from schemas.events import TimelinePage
from services.gateway.auth import Owned, owned
from services.gateway.errors import ApiError, unknown_agent
from services.gateway.openapi import errors, json_of
from services.gateway.runtime import Runtime, runtime
from services.gateway.sse import follow
from services.projection.store import AgentRow

MAX_SEQ = 2**62
router = APIRouter(tags=["timelines"])
Rt = Annotated[Runtime, Depends(runtime)]
Seq = Annotated[
    int, Query(ge=0, le=MAX_SEQ, description="Start after this seq (0: from the start).")
]


@router.get(
    "/v1/agents/{address}/timeline",
    response_class=Response,
    responses={
        200: json_of("TimelinePage", "Events after `after`, in seq order."),
        **errors(400, 401, 404, 422, 503),
    },
)
async def timeline(
    agent: Annotated[Owned, Depends(owned("read"))],
    rt: Rt,
    after: Seq = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response:
    """A page of the agent's recorded events; `last_seq` says whether more are there."""
    row = await known(rt, agent.address)
    events = await rt.projection.read(lambda store: store.timeline(agent.address, after, limit))
    last = max(row.last_seq if row else 0, events[-1].seq if events else 0)
    page = msgspec.json.encode(TimelinePage(tuple(events), last))
    return Response(page, media_type="application/json")


@router.get(
    "/v1/agents/{address}/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Server-Sent Events: recorded events (with `id: <seq>`), live "
            "`delta` and `retract` events, and `: keepalive` comments.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **errors(400, 401, 404, 422, 503),
    },
)
async def events(
    agent: Annotated[Owned, Depends(owned("read"))],
    rt: Rt,
    after: Seq = 0,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            description="The seq of the last event received; wins over `after`.",
        ),
    ] = None,
) -> StreamingResponse:
    """Follow the timeline: replay after `Last-Event-ID` (or `after`), then stream."""
    start = after if last_event_id is None else parse_seq(last_event_id)
    await known(rt, agent.address)
    body = follow(rt.hub, rt.projection, agent.address, start, rt.heartbeat)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


async def known(rt: Runtime, address: str) -> AgentRow | None:
    """The agent's row; None for one this gateway created a moment ago; else 404."""
    row = await rt.projection.read(lambda store: store.agent(address))
    if row is None and address not in rt.recent:
        raise unknown_agent(address)
    return row


def parse_seq(text: str) -> int:
    value = text.strip()
    if len(value) > len(str(MAX_SEQ)) or not (value.isascii() and value.isdigit()):
        value = ""
    if not value or int(value) > MAX_SEQ:
        raise ApiError(
            400,
            f"Last-Event-ID {text!r} is not a seq: send the id of the last event received, "
            "a whole number from 0",
        )
    return int(value)
