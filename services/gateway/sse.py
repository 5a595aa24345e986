"""A timeline as Server-Sent Events: replay what is recorded, then follow it live.

Frames:

    id: <seq>\\nevent: <event type>\\ndata: <the Event as JSON>\\n\\n     a recorded event
    event: delta\\ndata: <LiveDelta as JSON>\\n\\n                        live text, no id
    event: retract\\ndata: {"agent", "turn", "round"}\\n\\n                take a round's text back
    : keepalive\\n\\n                                                    heartbeat

Each follower gets every recorded event once, in seq order: the follower is registered
with the agent's feed before it replays from the projection, events at or below what it
has sent are dropped, and a gap is filled from the projection before going on. Deltas
carry no id, so a reconnect resumes by recorded seq only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec

from schemas.events import BODY_TAGS, Event
from schemas.live import Retraction
from services.gateway.feeds import PAGE, FeedItem, Hub
from services.gateway.live import LiveItem, LiveView
from services.gateway.reader import ProjectionReader, ProjectionUnavailableError

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


class _Position:
    """What one follower has been sent: the last seq, and its view of live rounds."""

    def __init__(self, projection: ProjectionReader, agent: str, after: int) -> None:
        self.projection = projection
        self.agent = agent
        self.last = after
        self.view = LiveView()

    async def catch_up(self, upto: int | None = None) -> AsyncIterator[bytes]:
        """Every recorded event after `last` (up to `upto`), from the projection."""
        while upto is None or self.last < upto:
            page = await self._page(self.last)
            for event in page:
                if upto is not None and event.seq > upto:
                    return
                yield self.record(event)
            if len(page) < PAGE:
                return

    async def _page(self, after: int) -> list[Event]:
        return await self.projection.read(lambda store: store.timeline(self.agent, after, PAGE))

    def record(self, event: Event) -> bytes:
        self.last = event.seq
        self.view.recorded(event)
        return event_frame(event)

    async def take(self, item: FeedItem) -> AsyncIterator[bytes]:
        if not isinstance(item, Event):
            for shown in self.view.show(item):
                yield live_frame(shown)
            return
        if item.seq <= self.last:
            return
        if item.seq > self.last + 1:
            async for frame in self.catch_up(upto=item.seq - 1):
                yield frame
        if item.seq == self.last + 1:
            yield self.record(item)

    async def resync(self, hub: Hub) -> AsyncIterator[bytes]:
        """After the queue overflowed: recorded events from the projection, then each live
        round's text so far."""
        async for frame in self.catch_up():
            yield frame
        for delta in hub.snapshot(self.agent):
            for shown in self.view.show(delta):
                yield live_frame(shown)


async def follow(
    hub: Hub, projection: ProjectionReader, agent: str, after: int, heartbeat: float
) -> AsyncIterator[bytes]:
    """The SSE body. It ends when the gateway shuts down or the projection cannot be read;
    the client then reconnects with Last-Event-ID."""
    follower = await hub.follow(agent)
    position = _Position(projection, agent, after)
    try:
        async for frame in position.catch_up():
            yield frame
        while True:
            item = await follower.next(heartbeat)
            if item == "closed":
                return
            if item == "idle":
                yield KEEPALIVE
            elif item == "lagged":
                async for frame in position.resync(hub):
                    yield frame
            else:
                async for frame in position.take(item):
                    yield frame
    except ProjectionUnavailableError:
        return
    finally:
        hub.unfollow(follower)
