"""Timelines: a JSON page after a seq, and the live SSE stream."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse

from schemas.pages import PAGE_ID_PATTERN
from services.gateway import pages, service
from services.gateway.auth import Owned, owned
from services.gateway.errors import ApiError
from services.gateway.openapi import errors, json_of
from services.gateway.runtime import Runtime, runtime
from services.gateway.sse import HeldStream, frames

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
    """A page of the agent's recorded events, at most `limit` of them and at most
    `TEASPILL_PAGE_MAX_BYTES` (at least one); `last_seq` says whether more are there."""
    page = await service.page(rt, agent, after, limit)
    return Response(msgspec.json.encode(page), media_type="application/json")


@router.get(
    "/v1/agents/{address}/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Server-Sent Events: recorded events (with `id: <seq>`), live "
            "`delta` and `retract` events, and `: keepalive` comments.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **errors(400, 401, 403, 404, 422, 429, 503),
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
    page: Annotated[
        str | None,
        Query(
            pattern=PAGE_ID_PATTERN,
            description="The following page's own id, the one it claims page calls with "
            "(a write key, or the conversation's end user with a publishable key): when "
            "this stream closes, what this page claimed with the same key (and end user) "
            "and did not answer has an unknown outcome.",
        ),
    ] = None,
) -> StreamingResponse:
    """Follow the timeline: replay after `Last-Event-ID` (or `after`), then stream."""
    start = after if last_event_id is None else parse_seq(last_event_id)
    if page is not None:
        pages.may_run(agent)
    await service.known(rt, agent.address)
    release = rt.streams.hold(agent.caller.bucket)
    body = frames(service.follow(rt, agent, start))
    return HeldStream(pages.watched(rt, agent, page, body), release)


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
