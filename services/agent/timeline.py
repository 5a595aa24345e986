"""The timeline as a wake writes it: events buffered, then written in chunks.

An event gets its seq when it is added and its time from the journaled step it belongs
to (`stamp`): events before a step take the step's start, events after it its end.

The wake hands the projection (the `Sink`, chosen once when the service is composed: the
projection of this process) each event as soon as its time is known (`show`, called once
a step returned: the step's result, and so what it decided, is durable then), without a
round trip and without waiting for the commit, so a follower sees a model's reply before
the round's tool calls run. The wake's object state gets the events as chunks: one at
the wake's end, and one whenever `CHUNK_EVENTS` events or `CHUNK_CHARS` characters of
their text are waiting (a wake of many rounds, large results). The wake's last flush
then makes sure of the projection: it writes every event of the wake and returns once
they are committed, or, when the projection cannot take them, once Restate has accepted
them for the `Projector`, which retries on its own (`Sink.write`). That write is not a
journaled step: a wake that dies before it returns replays and writes the same events
again, and every write is an upsert by seq, so an event that arrives twice is written
once. Both ways journal nothing, so a replay meets the same journal whichever way the
write went.

Handing an event over before it is in a chunk is safe because only events that journaled
steps already decided are handed over: a replay adds the same events with the same seqs
and times, so the projection never shows an event that the agent later takes back.
Every event is in a chunk before the wake returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import msgspec

from schemas.events import AgentState, Event, EventBody
from schemas.projection import EventBatch
from schemas.state import Chunk, TimelineMark
from services.agent.observers import Observer, notify

CHUNK_EVENTS = 64
CHUNK_CHARS = 1_000_000
"""A wake with this many events waiting, or this many characters of text in them (a tool
result may hold two million), writes them as a chunk at its next flush, so no chunk grows
with the length of a wake."""


class Sink(Protocol):
    """Where a wake's events go to reach the read side: the projection, served by this
    process (`services.projection.projector.Projection`)."""

    def offer(self, batch: EventBatch) -> None:
        """Queue the batch for the next commit and return at once; never raises."""

    async def write(self, batch: EventBatch) -> None:
        """Return once the batch is committed, or, when the projection cannot take it,
        once it is handed to the `Projector`; raise only when neither could be done (the
        wake's attempt then fails, and Restate retries it)."""


@dataclass
class _Pending:
    seq: int
    turn: int
    round: int
    body: EventBody
    at: float | None
    event: Event | None = None
    """Made once its time is known (and never changed after)."""


WriteChunk = Callable[[int, Chunk], None]
"""Writes chunk n of the timeline to the agent's state (`Store.write_chunk`)."""


class Timeline:
    def __init__(
        self,
        address: str,
        mark: TimelineMark,
        sink: Sink,
        write_chunk: WriteChunk,
        observers: Sequence[Observer] = (),
    ) -> None:
        self._address = address
        self.mark = mark
        self._sink = sink
        self._write_chunk = write_chunk
        self._observers = observers
        self._buffer: list[_Pending] = []
        self._shown = 0
        """Buffered events already handed over (the buffer's first ones)."""
        self._stamped = 0
        """Buffered events stamped so far (the buffer's first ones): a stamp goes on from
        there, not over the whole buffer (which holds a whole wake)."""
        self._unsent: list[Event] = []
        """Events in chunks that the projection is not sure to hold yet."""
        self._seq = mark.last_seq
        self._chars = 0
        """Characters of text in the buffered events (`_text_chars`)."""

    def add(self, turn: int, round_: int, *bodies: EventBody, at: float | None = None) -> None:
        for body in bodies:
            self._seq += 1
            self._buffer.append(_Pending(self._seq, turn, round_, body, at))
            self._chars += _text_chars(body)

    @property
    def pending(self) -> bool:
        """Whether events wait for a flush."""
        return bool(self._buffer)

    def stamp(self, at: float) -> None:
        """Give events that have no time yet this one (the start of the next step)."""
        for pending in self._buffer[self._stamped :]:
            if pending.at is None:
                pending.at = at
        self._stamped = len(self._buffer)

    def show(self) -> None:
        """Hand the projection and the observers the buffered events whose time is known
        and that they have not had yet."""
        ready = []
        for pending in self._buffer[self._shown :]:
            if pending.at is None:
                break
            ready.append(self._event(pending))
        if ready:
            self._shown += len(ready)
            self._sink.offer(EventBatch(tuple(ready), "running"))
            notify(self._observers, ready)

    async def flush(
        self, status: AgentState, clock: Callable[[], Awaitable[float]], *, last: bool = False
    ) -> None:
        """Show what is ready, and write a chunk when one is due (see the module's text);
        the wake's `last` flush writes the rest and makes sure the projection holds every
        event of the wake."""
        if not last and not self._chunk_due:
            self.show()
            return
        if self._buffer:
            events = await self._chunk(clock)
            shown, self._shown = self._shown, 0
            self._unsent.extend(events)
            notify(self._observers, events[shown:])
            if not last and events[shown:]:
                self._sink.offer(EventBatch(events[shown:], status))
        if last and self._unsent:
            await self._sink.write(EventBatch(tuple(self._unsent), status))
            self._unsent.clear()

    @property
    def _chunk_due(self) -> bool:
        return len(self._buffer) >= CHUNK_EVENTS or self._chars >= CHUNK_CHARS

    async def _chunk(self, clock: Callable[[], Awaitable[float]]) -> tuple[Event, ...]:
        if any(pending.at is None for pending in self._buffer[self._stamped :]):
            self.stamp(await clock())
        events = tuple(self._event(p) for p in self._buffer)
        self._buffer.clear()
        self._stamped = 0
        self._chars = 0
        self._write_chunk(self.mark.chunks, Chunk(events))
        self.mark = TimelineMark(events[-1].seq, self.mark.chunks + 1, self.mark.retired)
        return events

    def _event(self, p: _Pending) -> Event:
        if p.event is None:
            at = datetime.fromtimestamp(p.at or 0, UTC)
            p.event = Event(self._address, p.seq, p.turn, p.round, at, p.body)
        return p.event


def _text_chars(body: EventBody) -> int:
    """The characters of an event's text fields: what makes an event large (a tool's
    result, a model's reply)."""
    return sum([len(value) for value in msgspec.structs.astuple(body) if type(value) is str])
