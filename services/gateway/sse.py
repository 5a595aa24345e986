"""A timeline as Server-Sent Events: the frames of what a follower is given (`follow.py`).

    id: <seq>\\nevent: <event type>\\ndata: <the Event as JSON>\\n\\n     a recorded event
    event: delta\\ndata: <LiveDelta as JSON>\\n\\n                        live text, no id
    event: retract\\ndata: {"agent", "turn", "round"}\\n\\n                take a round's text back
    : keepalive\\n\\n                                                    heartbeat

Deltas carry no id, so a reconnect resumes by recorded seq only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import msgspec
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from schemas.events import BODY_TAGS, Event
from schemas.live import Retraction
from services.gateway.follow import Followed
from services.gateway.live import LiveItem

KEEPALIVE = b": keepalive\n\n"


def event_frame(event: Event) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (
        event.seq,
        BODY_TAGS[type(event.body)].encode(),
        msgspec.json.encode(event),
    )


def live_frame(item: LiveItem) -> bytes:
    name = b"retract" if isinstance(item, Retraction) else b"delta"
    return b"event: %s\ndata: %s\n\n" % (name, msgspec.json.encode(item))


def frame(item: Followed) -> bytes:
    if isinstance(item, Event):
        return event_frame(item)
    if isinstance(item, str):
        return KEEPALIVE
    return live_frame(item)


async def frames(items: AsyncIterator[Followed]) -> AsyncIterator[bytes]:
    async for item in items:
        yield frame(item)


HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class HeldStream(StreamingResponse):
    """A streamed answer that gives back its stream slot (`rates.StreamSlots`) when it
    ends, however it ends: finished, cut by the client, or never started."""

    def __init__(self, body: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream", headers=HEADERS)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
