"""The agent's timeline in object state, stored as bounded segments."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec
import restate

from schemas.catalog import EventBatch
from schemas.events import Event, EventBody, TimelinePage
from schemas.state import SEGMENT_SIZE, Segment, TimelineMeta
from services.agent.observers import Observer, notify

META = "timeline"
PROJECTOR = "Projector"
MAX_PAGE = 500


def segment_key(index: int) -> str:
    return f"timeline.{index}"


def segment_index(seq: int) -> int:
    return (seq - 1) // SEGMENT_SIZE


class Timeline:
    """Appends events with contiguous seq numbers. Only the agent's exclusive handler
    writes here."""

    def __init__(
        self, ctx: restate.ObjectContext, address: str, observers: Sequence[Observer] = ()
    ) -> None:
        self._ctx = ctx
        self._address = address
        self._observers = observers
        self._meta: TimelineMeta | None = None
        self._segment: tuple[int, Segment] | None = None

    async def last_seq(self) -> int:
        if self._meta is None:
            self._meta = await self._ctx.get(META, type_hint=TimelineMeta) or TimelineMeta()
        return self._meta.last_seq

    async def append(self, turn: int, round_: int, *bodies: EventBody) -> list[Event]:
        seq = await self.last_seq()
        at = datetime.fromtimestamp(await self._ctx.time(), UTC)
        events = []
        for body in bodies:
            seq += 1
            event = Event(self._address, seq, turn, round_, at, body)
            await self._store(event)
            events.append(event)
        self._meta = TimelineMeta(seq)
        self._ctx.set(META, self._meta)
        batch = msgspec.json.encode(EventBatch(tuple(events)))
        self._ctx.generic_send(PROJECTOR, "events", batch, key=self._address)
        notify(self._observers, events)
        return events

    async def _store(self, event: Event) -> None:
        index = segment_index(event.seq)
        if self._segment is None or self._segment[0] != index:
            stored = await self._ctx.get(segment_key(index), type_hint=Segment)
            self._segment = (index, stored or Segment())
        segment = Segment((*self._segment[1].events, event))
        self._segment = (index, segment)
        self._ctx.set(segment_key(index), segment)


async def last_seq_of(ctx: restate.ObjectSharedContext | restate.ObjectContext) -> int:
    meta = await ctx.get(META, type_hint=TimelineMeta) or TimelineMeta()
    return meta.last_seq


async def read_page(ctx: restate.ObjectSharedContext, after_seq: int, limit: int) -> TimelinePage:
    meta = await ctx.get(META, type_hint=TimelineMeta) or TimelineMeta()
    wanted = min(limit, MAX_PAGE, max(meta.last_seq - after_seq, 0))
    events: list[Event] = []
    seq = after_seq + 1
    while len(events) < wanted:
        segment = await ctx.get(segment_key(segment_index(seq)), type_hint=Segment) or Segment()
        fresh = [e for e in segment.events if e.seq >= seq][: wanted - len(events)]
        if not fresh:
            break
        events.extend(fresh)
        seq = fresh[-1].seq + 1
    return TimelinePage(events=tuple(events), last_seq=meta.last_seq)
