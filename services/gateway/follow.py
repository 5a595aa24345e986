"""Following a timeline as typed items: replay what is recorded, then live.

Each follower gets every recorded event once, in seq order: the follower is registered
with the agent's feed before it replays from the projection, events at or below what it
has been given are dropped, and a gap is filled from the projection before going on.
Live deltas and retractions pass through the follower's `LiveView`, so its rounds stay
contiguous however it joined. The SSE route writes these items as frames (`sse.py`); the
AG-UI route translates them (`agui.py`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Literal

from schemas.events import Event
from services.gateway.feeds import PAGE, FeedItem, Hub
from services.gateway.live import LiveItem, LiveView
from services.gateway.reader import ProjectionReader, ProjectionUnavailableError
from services.projection.store import Page

Keepalive = Literal["keepalive"]
Followed = Event | LiveItem | Keepalive
"""What a follower is given: a recorded event, a live delta or retraction, or a
keepalive when nothing arrived within the heartbeat."""
KEEPALIVE: Keepalive = "keepalive"


class _Position:
    """What one follower has been given: the last seq, and its view of live rounds."""

    def __init__(
        self, projection: ProjectionReader, agent: str, after: int, page_bytes: int
    ) -> None:
        self.projection = projection
        self.agent = agent
        self.last = after
        self.page_bytes = page_bytes
        self.view = LiveView()

    async def catch_up(self, upto: int | None = None) -> AsyncIterator[Event]:
        """Every recorded event after `last` (up to `upto`), from the projection."""
        while upto is None or self.last < upto:
            page = await self._page(self.last)
            for event in page.events:
                if upto is not None and event.seq > upto:
                    return
                yield self.record(event)
            if not page.full:
                return

    async def _page(self, after: int) -> Page:
        return await self.projection.read(
            lambda store: store.page(self.agent, after, PAGE, max_bytes=self.page_bytes)
        )

    def record(self, event: Event) -> Event:
        self.last = event.seq
        self.view.recorded(event)
        return event

    async def take(self, item: FeedItem) -> AsyncIterator[Followed]:
        if not isinstance(item, Event):
            for shown in self.view.show(item):
                yield shown
            return
        if item.seq <= self.last:
            return
        if item.seq > self.last + 1:
            async for missed in self.catch_up(upto=item.seq - 1):
                yield missed
        if item.seq == self.last + 1:
            yield self.record(item)

    async def resync(self, hub: Hub) -> AsyncIterator[Followed]:
        """After the queue overflowed: recorded events from the projection, then each live
        round's text so far."""
        async for event in self.catch_up():
            yield event
        for delta in hub.snapshot(self.agent):
            for shown in self.view.show(delta):
                yield shown


async def follow(
    hub: Hub,
    projection: ProjectionReader,
    agent: str,
    after: int,
    *,
    heartbeat: float,
    page_bytes: int,
) -> AsyncGenerator[Followed, None]:
    """The items after `after`. It ends when the gateway shuts down or the projection
    cannot be read; an SSE client then reconnects with Last-Event-ID."""
    follower = await hub.follow(agent)
    position = _Position(projection, agent, after, page_bytes)
    try:
        async for event in position.catch_up():
            yield event
        hub.replayed(follower, position.last)
        while True:
            item = await follower.next(heartbeat)
            if item == "closed":
                return
            if item == "idle":
                yield KEEPALIVE
            elif item == "lagged":
                async for followed in position.resync(hub):
                    yield followed
            else:
                async for followed in position.take(item):
                    yield followed
    except ProjectionUnavailableError:
        return
    finally:
        hub.unfollow(follower)
