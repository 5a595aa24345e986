"""The timeline as a wake writes it: events buffered, then flushed as one chunk.

An event gets its seq when it is added and its time from the journaled step it belongs
to (`stamp`): events before a step take the step's start, events after it its end. A
flush writes the buffered events as one new chunk (each event is written once) and sends
them to the projector in one batch. Only an event that no step timed (a wake that runs
no step) costs a journaled clock read, once per flush.

Every event is flushed before the wake returns; a crash before that replays the wake,
which adds the same events with the same seqs and times again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import restate

from schemas.catalog import EventBatch
from schemas.events import AgentState, Event, EventBody
from schemas.state import Chunk, TimelineMark
from services.agent.observers import Observer, notify
from services.agent.store import Store
from services.contracts import PROJECT_EVENTS
from services.durable import send


@dataclass
class _Pending:
    seq: int
    turn: int
    round: int
    body: EventBody
    at: float | None


class Timeline:
    def __init__(
        self,
        ctx: restate.ObjectContext,
        store: Store,
        address: str,
        mark: TimelineMark,
        observers: Sequence[Observer] = (),
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._address = address
        self.mark = mark
        self._observers = observers
        self._buffer: list[_Pending] = []
        self._seq = mark.last_seq

    def add(self, turn: int, round_: int, *bodies: EventBody, at: float | None = None) -> None:
        for body in bodies:
            self._seq += 1
            self._buffer.append(_Pending(self._seq, turn, round_, body, at))

    @property
    def pending(self) -> bool:
        """Whether events wait for a flush."""
        return bool(self._buffer)

    def stamp(self, at: float) -> None:
        """Give events that have no time yet this one (the start of the next step)."""
        for pending in self._buffer:
            if pending.at is None:
                pending.at = at

    async def flush(self, status: AgentState, clock: Callable[[], Awaitable[float]]) -> None:
        """Write the buffered events as one chunk and send them to the projector."""
        if not self._buffer:
            return
        if any(pending.at is None for pending in self._buffer):
            self.stamp(await clock())
        events = tuple(
            Event(
                self._address,
                p.seq,
                p.turn,
                p.round,
                datetime.fromtimestamp(p.at or 0, UTC),
                p.body,
            )
            for p in self._buffer
        )
        self._buffer.clear()
        self._store.write_chunk(self.mark.chunks, Chunk(events))
        self.mark = TimelineMark(events[-1].seq, self.mark.chunks + 1)
        send(self._ctx, PROJECT_EVENTS, EventBatch(events, status), key=self._address)
        notify(self._observers, events)
