"""Fan-out: one reader per followed agent, any number of followers.

An `AgentFeed` reads the agent's new events from the projection and passes them, and the
live deltas the execution plane pushes, to every follower's queue in one order. It reads
when the projector tells the gateway that the agent's timeline grew (`Hub.projected`),
and every `interval` besides, so that a notice that never came costs latency, never an
event. It runs while the agent has followers or live rounds, and stops by itself when it
has neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Literal

from schemas.events import Event
from schemas.live import LiveDelta
from schemas.projection import Projected
from services.gateway.live import WHOLE_TURN, LiveItem, LiveRounds, recorded_round
from services.gateway.reader import ProjectionReader, ProjectionUnavailableError
from services.projection.store import Page

FeedItem = Event | LiveItem
Signal = Literal["idle", "lagged", "closed"]
"""`idle`: nothing arrived within the wait; `lagged`: the follower's queue overflowed and
was emptied; `closed`: the feed stopped (the gateway is shutting down)."""

PAGE = 500
log = logging.getLogger(__name__)


class Follower:
    """One follower's queue. Bounded: a follower too slow to keep up loses its queue and
    is told so, and catches up from the projection instead."""

    def __init__(self, agent: str, limit: int) -> None:
        self.agent = agent
        self._limit = limit
        self._queue: deque[FeedItem] = deque()
        self._wake = asyncio.Event()
        self._lagged = False
        self._closed = False

    def push(self, item: FeedItem) -> None:
        if len(self._queue) >= self._limit:
            self._queue.clear()
            self._lagged = True
        else:
            self._queue.append(item)
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def next(self, patience: float) -> FeedItem | Signal:
        if not (self._queue or self._lagged or self._closed):
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), patience)
            except TimeoutError:
                return "idle"
        if self._lagged:
            self._lagged = False
            return "lagged"
        if self._queue:
            return self._queue.popleft()
        return "closed" if self._closed else "idle"


class AgentFeed:
    def __init__(
        self,
        agent: str,
        projection: ProjectionReader,
        interval: float,
        live_ttl: float,
        on_end: Callable[[AgentFeed], None],
        *,
        page_bytes: int | None = None,
    ) -> None:
        self.agent = agent
        self.page_bytes = page_bytes
        self.rounds = LiveRounds(agent)
        self.followers: set[Follower] = set()
        self.joining = 0
        self.ready = asyncio.Event()
        self._projection = projection
        self._interval = interval
        self._live_ttl = live_ttl
        self._on_end = on_end
        self._cursor = 0
        self._nudged = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name=f"feed {agent}")
        self.task.add_done_callback(_report)

    def wanted(self) -> bool:
        return bool(self.followers or self.joining or self.rounds)

    def nudge(self, last_seq: int | None = None) -> None:
        """Read now: the projection holds events up to `last_seq` (None: look anyway)."""
        if last_seq is None or last_seq > self._cursor:
            self._nudged.set()

    def publish(self, item: FeedItem) -> None:
        for follower in self.followers:
            follower.push(item)

    def add(self, follower: Follower) -> None:
        self.followers.add(follower)
        for delta in self.rounds.snapshot():
            follower.push(delta)

    async def _run(self) -> None:
        try:
            await self._start()
            self.ready.set()
            while self.wanted():
                await self._poll()
        finally:
            self.ready.set()
            for follower in self.followers:
                follower.close()
            self._on_end(self)

    async def _start(self) -> None:
        """Begin after what the projection holds now: a follower replays that itself."""
        while self.wanted():
            try:
                row = await self._projection.read(lambda store: store.agent(self.agent))
            except ProjectionUnavailableError:
                await asyncio.sleep(self._interval)
                continue
            if row is not None:
                self._cursor = row.last_seq
                if row.status == "idle" and row.turn:
                    self.rounds.supersede((row.turn, WHOLE_TURN))
            return

    def rewind(self, seq: int) -> None:
        """A follower's replay ended at `seq`, below this feed's cursor: the projection
        had a hole when the feed began after its last seq (events written out of order,
        as when a write failed and is made again later). Read again from `seq`, so that
        the hole's events, once written, reach every follower; those that have them drop
        the repeats."""
        if seq < self._cursor:
            self._cursor = seq
            self._nudged.set()

    async def _poll(self) -> None:
        self._nudged.clear()
        start = self._cursor
        try:
            page = await self._projection.read(
                lambda store: store.page(self.agent, start, PAGE, max_bytes=self.page_bytes)
            )
        except ProjectionUnavailableError:
            page = Page([], full=False)
        for event in page.events:
            finished = recorded_round(event)
            if finished is not None:
                self.rounds.supersede(finished)
            self.publish(event)
        if page.events and self._cursor == start:  # not rewound while it read
            self._cursor = page.events[-1].seq
        self.rounds.expire(time.monotonic(), self._live_ttl)
        if not page.full:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudged.wait(), self._interval)


class Hub:
    """Every feed of this gateway process, by agent address."""

    def __init__(
        self,
        projection: ProjectionReader,
        *,
        interval: float = 1.0,
        queue_limit: int = 10_000,
        live_ttl: float = 600.0,
        page_bytes: int | None = None,
    ) -> None:
        """`page_bytes`: the most bytes of events a feed reads at once."""
        self._page_bytes = page_bytes
        self._projection = projection
        self._interval = interval
        self._queue_limit = queue_limit
        self._live_ttl = live_ttl
        self._feeds: dict[str, AgentFeed] = {}

    async def follow(self, agent: str) -> Follower:
        """A new follower, registered before it replays anything: whatever the projection
        gains after this call reaches its queue."""
        feed = self._feed(agent)
        feed.joining += 1
        try:
            await feed.ready.wait()
        finally:
            feed.joining -= 1
        follower = Follower(agent, self._queue_limit)
        if feed.task.done():
            follower.close()
        else:
            feed.add(follower)
        return follower

    def replayed(self, follower: Follower, seq: int) -> None:
        """The follower replayed the projection up to `seq` (`AgentFeed.rewind`)."""
        feed = self._feeds.get(follower.agent)
        if feed is not None:
            feed.rewind(seq)

    def unfollow(self, follower: Follower) -> None:
        feed = self._feeds.get(follower.agent)
        if feed is not None:
            feed.followers.discard(follower)
            if not feed.wanted():
                feed.nudge()  # so that it ends now, not after its interval

    def projected(self, seqs: Sequence[Projected]) -> int:
        """The projector committed these agents' events; returns how many are followed."""
        followed = 0
        for projected in seqs:
            feed = self._feeds.get(projected.agent)
            if feed is not None:
                feed.nudge(projected.last_seq)
                followed += 1
        return followed

    def snapshot(self, agent: str) -> list[LiveDelta]:
        feed = self._feeds.get(agent)
        return feed.rounds.snapshot() if feed is not None else []

    def live(self, deltas: Sequence[LiveDelta]) -> tuple[int, list[int]]:
        """Apply pushed deltas; returns how many brought something new, and how much of
        each one's round this gateway holds after it (`LiveRounds.held`)."""
        fresh = 0
        held: list[int] = []
        now = time.monotonic()
        for delta in deltas:
            feed = self._feed(delta.agent)
            items = feed.rounds.apply(delta, now)
            for item in items:
                feed.publish(item)
            fresh += bool(items)
            held.append(feed.rounds.held(delta))
        return fresh, held

    @property
    def feeds(self) -> int:
        return len(self._feeds)

    async def close(self) -> None:
        feeds = list(self._feeds.values())
        for feed in feeds:
            feed.task.cancel()
        for feed in feeds:
            with contextlib.suppress(asyncio.CancelledError):
                await feed.task

    def _feed(self, agent: str) -> AgentFeed:
        feed = self._feeds.get(agent)
        if feed is None:
            feed = AgentFeed(
                agent,
                self._projection,
                self._interval,
                self._live_ttl,
                self._ended,
                page_bytes=self._page_bytes,
            )
            self._feeds[agent] = feed
        return feed

    def _ended(self, feed: AgentFeed) -> None:
        if self._feeds.get(feed.agent) is feed:
            del self._feeds[feed.agent]


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped", task.get_name(), exc_info=task.exception())
