"""The agent's object state: every key, and the only code that reads or writes them.

- `agent`: the `AgentRecord`, read once at the start of a wake and written once at its end;
- `running`: the id of the invocation driving a turn right now, so a stop can cancel it;
- `history.{n}`: segment n of the history (one finished turn's messages), written once;
- `recent`: a copy of the segments not folded yet (what the prompt shows verbatim), read
  with the record in one round trip and rewritten when a turn ends or a fold moves on;
- `history`: the whole history as one value, as agents kept it before segments: read once
  by the first wake that finds it, written again as segment 0 and cleared;
- `timeline.{n}`: chunk n of the timeline (a wake's events; see `timeline.py` for its
  bounds), written once and never again.

A running wake writes chunks before it writes the record, so a reader finds the newest
chunks by reading on from the record's mark until a chunk is missing.
"""

from __future__ import annotations

from typing import Any

import restate

from schemas.context import ContextState, Recent, Segment
from schemas.events import Event
from schemas.state import AgentRecord, Chunk, History, TimelineMark
from services.agent import legacy

RECORD = "agent"
RUNNING = "running"
HISTORY = "history"
RECENT = "recent"
MAX_PAGE = 500

Readable = restate.ObjectSharedContext | restate.ObjectContext


def chunk_key(index: int) -> str:
    return f"timeline.{index}"


def segment_key(index: int) -> str:
    return f"history.{index}"


class Reader:
    """Reads that shared handlers may make while a wake runs."""

    def __init__(self, ctx: Readable) -> None:
        self._ctx = ctx

    async def record(self) -> AgentRecord:
        return await self._ctx.get(RECORD, type_hint=AgentRecord) or AgentRecord()

    async def running(self) -> str | None:
        return await self._ctx.get(RUNNING, type_hint=str)

    async def chunk(self, index: int) -> Chunk | None:
        return await self._ctx.get(chunk_key(index), type_hint=Chunk)

    async def mark(self, record: AgentRecord) -> TimelineMark:
        """The timeline's true end: the record's mark, plus chunks a running wake wrote."""
        mark = record.timeline
        while (chunk := await self.chunk(mark.chunks)) is not None:
            mark = TimelineMark(chunk.events[-1].seq, mark.chunks + 1)
        return mark

    async def page(self, after_seq: int, limit: int) -> tuple[tuple[Event, ...], int]:
        """Up to `limit` events after `after_seq`, and the newest seq."""
        mark = await self.mark(await self.record())
        wanted = min(limit, MAX_PAGE, max(mark.last_seq - after_seq, 0))
        events: list[Event] = []
        index = await self._chunk_of(after_seq + 1, mark.chunks) if wanted else mark.chunks
        while len(events) < wanted and index < mark.chunks:
            chunk = await self.chunk(index)
            if chunk is None:
                break
            events.extend(e for e in chunk.events if e.seq > after_seq)
            index += 1
        return tuple(events[:wanted]), mark.last_seq

    async def _chunk_of(self, seq: int, chunks: int) -> int:
        """The index of the chunk holding `seq`: a binary search on first seqs, so a read
        costs a few state reads however long the timeline is."""
        low, high = 0, chunks - 1
        while low < high:
            middle = (low + high + 1) // 2
            chunk = await self.chunk(middle)
            if chunk is not None and chunk.events[0].seq <= seq:
                low = middle
            else:
                high = middle - 1
        return low


class Store(Reader):
    """The exclusive handler's view: reads, and the writes only it makes."""

    def __init__(self, ctx: restate.ObjectContext) -> None:
        super().__init__(ctx)
        self._writer = ctx
        self._segments: dict[int, Segment] = {}
        self._recent = range(0)
        """The indices of the segments the `recent` key holds."""
        self._legacy: list[str] = []

    async def record(self, *alongside: restate.RestateDurableFuture[Any]) -> AgentRecord:
        """The record, and the recent copy read with it; both reads and `alongside` are
        awaited together: one round trip. For an agent whose state predates the record,
        the record built from the old keys."""
        recent = self._writer.get(RECENT, type_hint=Recent)
        loaded = self._writer.get(RECORD, type_hint=AgentRecord)
        await restate.gather(*alongside, recent, loaded)  # type: ignore[arg-type]
        if (kept := await recent) is not None:
            self._recent = range(kept.first, kept.first + len(kept.segments))
            self._segments.update(zip(self._recent, kept.segments, strict=True))
        record = await loaded
        if record is not None:
            return record
        keys = set(await self._writer.state_keys()) & set(legacy.KEYS)
        self._legacy = sorted(keys)
        raw = restate.serde.BytesSerde()
        values = {key: await self._writer.get(key, serde=raw) for key in self._legacy}  # type: ignore[arg-type]
        return legacy.record_from({k: v for k, v in values.items() if v}) or AgentRecord()

    def save(self, record: AgentRecord) -> None:
        self._writer.set(RECORD, record)
        for key in self._legacy:
            self._writer.clear(key)
        self._legacy = []

    def write_chunk(self, index: int, chunk: Chunk) -> None:
        self._writer.set(chunk_key(index), chunk)

    def set_running(self, invocation: str | None) -> None:
        if invocation is None:
            self._writer.clear(RUNNING)
        else:
            self._writer.set(RUNNING, invocation)

    def write_segment(self, index: int, segment: Segment) -> None:
        self._segments[index] = segment
        self._writer.set(segment_key(index), segment)

    async def segment(self, index: int) -> Segment | None:
        if index not in self._segments:
            found = await self._writer.get(segment_key(index), type_hint=Segment)
            if found is None:
                return None
            self._segments[index] = found
        return self._segments[index]

    async def recent(self, context: ContextState) -> tuple[Segment, ...]:
        """The segments not folded yet: what the prompt shows verbatim (bounded by the
        fold threshold, so a wake never reads the whole history). Usually all came with
        the record; any missing (an agent from before the `recent` key) are read at once."""
        indices = range(context.folded, context.segments)
        reads = {
            i: self._writer.get(segment_key(i), type_hint=Segment)
            for i in indices
            if i not in self._segments
        }
        for index, read in reads.items():  # every read issued first: one round trip
            if (found := await read) is not None:
                self._segments[index] = found
        return tuple(self._segments[i] for i in indices if i in self._segments)

    async def keep_recent(self, context: ContextState) -> None:
        """Rewrite the `recent` copy when the segments the prompt shows have changed (a
        turn ended, a late report came, a fold moved on). A copy is only ever whole: if a
        segment were missing, the copy is left as it was (readers then fill the gap from
        the segments themselves)."""
        wanted = range(context.folded, context.segments)
        if wanted == self._recent:
            return
        segments = await self.recent(context)
        if len(segments) == len(wanted):
            self._writer.set(RECENT, Recent(context.folded, segments))
            self._recent = wanted

    async def of_turn(self, turn: int, context: ContextState) -> list[Segment]:
        """The segments of one turn: a binary search on turn numbers (segments are written
        in turn order), so a read costs a few state reads however long the history is."""
        low, high = 0, context.segments
        while low < high:
            middle = (low + high) // 2
            segment = await self.segment(middle)
            if segment is not None and segment.turn < turn:
                low = middle + 1
            else:
                high = middle
        found: list[Segment] = []
        while low < context.segments and (segment := await self.segment(low)) is not None:
            if segment.turn != turn:
                break
            found.append(segment)
            low += 1
        return found

    async def legacy(self) -> History | None:
        """The one-value history of an agent from before segments, cleared once read."""
        history = await self._writer.get(HISTORY, type_hint=History)
        if history is not None:
            self._writer.clear(HISTORY)
        return history
