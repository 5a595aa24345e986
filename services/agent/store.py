"""The agent's object state: every key, and the only code that reads or writes them.

- `agent`: the `StoredAgent`, read once at the start of a wake and written once at its
  end: the machine's `AgentRecord`, a copy of the segments not folded yet (what the
  prompt shows verbatim) and the id of the last wake that ran a turn, in the layout
  `migrations.VERSION` (an older one is brought forward as it is read);
- `running`: the wake that runs a turn now, or that ran the last one (`RunningWake`: its
  id and its bell): set when a wake starts a turn, never cleared (the record names the
  last wake that returned), so a stop can cancel it and a steer or a pause can ring it;
- `history.{n}`: segment n of the history (one finished turn's messages), written once,
  when it leaves the record's copy (a fold moves past it): while the prompt shows it
  verbatim, the copy is where it is kept, so a turn's messages are written once per wake,
  not twice;
- `timeline.{n}`: chunk n of the timeline (a wake's events; see `timeline.py` for its
  bounds), written once and never again; the oldest leave the state for the archive
  store once more than `keep` are held (`Store.retire`, timeline retention), and are read
  from there (`Retired`).

A running wake writes chunks before it writes the record, so a reader finds the newest
chunks by reading on from the record's mark until a chunk is missing.

The bell (`Doorbell`): how something that arrives while a wake runs a turn reaches it.

A wake that drives a turn makes an awakeable and names it beside its own id in the
`running` key, which shared handlers read while the wake runs. A message that steers, or
a pause, resolves it with a `Bell` (`services/agent/object.py`); the turn hears it at its
next round boundary (the harness's `Between`). Hearing costs no journal entry: the bell
is checked beside a step the wake has finished already, the way Restate's own combinators
check a future that may have completed. A bell that rang is replaced by a new one, named
in `running` again (one state write per steer).

One awakeable completes once: two that ring it in one round before the wake names the
next bell are heard as the first alone. Nothing is lost by that: a steered message is
also a wake of its own, which runs as the next turn when the running one never heard it,
and a pause is also a wake that holds the agent when it arrives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import restate

from schemas.chat import ChatMessage
from schemas.context import ContextState, Recent, Segment
from schemas.events import Event, EventBody, MessageQueued, MessageSteered
from schemas.harness import Ack, Arrived, Recall
from schemas.state import AgentRecord, Bell, Chunk, RunningWake, StoredAgent, TimelineMark
from schemas.wake import Pause
from services.agent.migrations import VERSION, NewerStateError, load
from services.durable import rang, step_options, together
from services.harness.recall import MATCHES, SEARCH_SEGMENTS, RecallQuery, matches

RECORD = "agent"
RUNNING = "running"
MAX_PAGE = 500
RAW = restate.serde.BytesSerde()

Readable = restate.ObjectSharedContext | restate.ObjectContext
RETIRE_BATCH = 16
"""Chunks are retired this many at least at a time, so a wake seldom has any to move."""
Retired = Callable[[int], Awaitable[Chunk | None]]
"""Reads chunk n from the archive store, where retention moved it (None: not there)."""


async def none_retired(index: int) -> Chunk | None:
    return None


def chunk_key(index: int) -> str:
    return f"timeline.{index}"


def segment_key(index: int) -> str:
    return f"history.{index}"


class Reader:
    """Reads that shared handlers may make while a wake runs."""

    def __init__(self, ctx: Readable, retired: Retired = none_retired) -> None:
        self._ctx = ctx
        self._retired = retired

    async def stored(self) -> StoredAgent:
        return decoded(await self._ctx.get(RECORD, serde=RAW))  # type: ignore[arg-type]

    async def running(self, stored: StoredAgent) -> RunningWake | None:
        """The wake running a turn now, if one is; `stored` read before."""
        raw = await self._ctx.get(RUNNING, serde=RAW)
        if not raw:
            return None
        # A value written before the bell was kept beside it is the invocation id alone.
        found = msgspec.json.decode(raw, type=RunningWake | str)
        running = found if isinstance(found, RunningWake) else RunningWake(found)
        return running if running.invocation != stored.finished else None

    async def chunk(self, index: int, chunks: int = 0) -> Chunk | None:
        """Chunk `index`; one below `chunks` (the mark's) that the state no longer holds
        was retired, and is read from the archive store (a wake that retires chunks writes
        the archive first, then clears them, then writes the record's mark)."""
        found = await self._ctx.get(chunk_key(index), type_hint=Chunk)
        if found is None and index < chunks:
            return await self._retired(index)
        return found

    async def mark(self, record: AgentRecord) -> TimelineMark:
        """The timeline's true end: the record's mark, plus chunks a running wake wrote."""
        mark = record.timeline
        while (chunk := await self.chunk(mark.chunks)) is not None:
            mark = TimelineMark(chunk.events[-1].seq, mark.chunks + 1, mark.retired)
        return mark

    async def page(self, after_seq: int, limit: int) -> tuple[tuple[Event, ...], int]:
        """Up to `limit` events after `after_seq`, and the newest seq."""
        mark = await self.mark((await self.stored()).record)
        wanted = min(limit, MAX_PAGE, max(mark.last_seq - after_seq, 0))
        events: list[Event] = []
        index = await self._chunk_of(after_seq + 1, mark.chunks) if wanted else mark.chunks
        while len(events) < wanted and index < mark.chunks:
            chunk = await self.chunk(index, mark.chunks)
            if chunk is None:
                break
            events.extend(e for e in chunk.events if e.seq > after_seq)
            index += 1
        return tuple(events[:wanted]), mark.last_seq

    async def events_upto(self, seq: int) -> list[Event]:
        """The first `seq` events (fewer if the timeline is shorter), a page at a time."""
        events: list[Event] = []
        while len(events) < seq:
            page, _ = await self.page(len(events), MAX_PAGE)
            if not page:
                break
            events.extend(page)
        return events[:seq]

    async def history(self, stored: StoredAgent, last_turn: int) -> list[Segment]:
        """The history's segments from `history.0` on, up to those of `last_turn`: from the
        record's copy where it holds them, else from their own keys."""
        kept = stored.recent
        copy = dict(zip(kept.indices, kept.segments, strict=True)) if kept is not None else {}
        found: list[Segment] = []
        for index in range(stored.record.context.segments):
            segment = copy.get(index) or await self._ctx.get(segment_key(index), type_hint=Segment)
            if segment is None or segment.turn > last_turn:
                break
            found.append(segment)
        return found

    async def _chunk_of(self, seq: int, chunks: int) -> int:
        """The index of the chunk holding `seq`: a binary search on first seqs, so a read
        costs a few state reads however long the timeline is."""
        low, high = 0, chunks - 1
        while low < high:
            middle = (low + high + 1) // 2
            chunk = await self.chunk(middle, chunks)
            if chunk is not None and chunk.events[0].seq <= seq:
                low = middle
            else:
                high = middle - 1
        return low


@dataclass(frozen=True)
class Preloaded:
    """The record's stored bytes (None: there are none), as the wake's handler already
    read them: the store takes them instead of reading the key a second time."""

    raw: bytes | None


class Store(Reader):
    """The exclusive handler's view: reads, and the writes only it makes."""

    def __init__(self, ctx: restate.ObjectContext, preloaded: Preloaded | None = None) -> None:
        super().__init__(ctx)
        self._writer = ctx
        self._preloaded = preloaded
        self._segments: dict[int, Segment] = {}
        self._unkeyed: set[int] = set()
        """Segments that may have no key of their own: those of the copy read, and those
        added by this wake. `finish` writes the ones its copy no longer holds."""
        self._stored = StoredAgent(VERSION)
        """The value as read, with its copy: what `finish` compares with."""
        self.new = False
        """`record` found none stored: this wake makes the agent."""
        self._running = ""
        """The id of this wake, once it has started a turn."""
        self._named: RunningWake | None = None

    async def record(self, *alongside: restate.RestateDurableFuture[Any]) -> AgentRecord:
        """The machine's record (the store keeps the rest of the envelope), read together
        with `alongside`: one round trip."""
        if self._preloaded is not None:
            raw, self._preloaded = self._preloaded.raw, None
            if alongside:
                await together(*alongside)
        else:
            loaded = self._writer.get(RECORD, serde=RAW)
            await together(*alongside, loaded)
            raw = await loaded
        self.new = raw is None
        self._stored = decoded(raw)
        if (kept := self._stored.recent) is not None:
            self._segments.update(zip(kept.indices, kept.segments, strict=True))
            self._unkeyed.update(kept.indices)
        return self._stored.record

    async def finish(self, record: AgentRecord) -> None:
        """Write the record, with the copy of the segments the prompt shows verbatim and
        the last wake that ran a turn, if any of them changed: the wake's end."""
        recent = await self._recent_copy(record.context)
        stored = StoredAgent(VERSION, record, recent, self._finished)
        held = set(recent.indices) if recent is not None else set()
        for index in sorted(self._unkeyed - held):  # leaving the copy: each to its own key
            self._writer.set(segment_key(index), self._segments[index])
        self._unkeyed &= held
        if stored != self._stored:
            self._writer.set(RECORD, stored)
            self._stored = stored

    async def _recent_copy(self, context: ContextState) -> Recent | None:
        """The copy as read, if it still holds what the prompt shows; else a new one. A
        copy is only ever whole: if a segment were missing, the copy read is kept (readers
        then fill the gap from the segments themselves)."""
        kept = self._stored.recent
        wanted = range(context.folded, context.segments)
        if kept is not None and kept.indices == wanted:
            return kept
        segments = await self.recent(context)
        return Recent(context.folded, segments) if len(segments) == len(wanted) else kept

    @property
    def _finished(self) -> str:
        return self._running or self._stored.finished

    def write_chunk(self, index: int, chunk: Chunk) -> None:
        self._writer.set(chunk_key(index), chunk)

    async def retire(
        self, mark: TimelineMark, keep: int, put: Callable[[int, Sequence[bytes]], Awaitable[None]]
    ) -> TimelineMark:
        """Timeline retention: when the state holds `keep` + `RETIRE_BATCH` chunks or more,
        the oldest (all but the newest `keep`) are handed to `put` (the archive store, in
        one journaled step, which writes them whole and may run twice), and only once
        that step is durable cleared from the state. The mark returned names them retired;
        the record written at the wake's end carries it. Readers that meet a cleared
        chunk before the record says so read it from the archive as well."""
        upto = mark.chunks - keep
        if keep < 1 or upto - mark.retired < RETIRE_BATCH:
            return mark
        indices = range(mark.retired, upto)
        reads = [self._writer.get(chunk_key(i), serde=RAW) for i in indices]  # type: ignore[arg-type]
        await together(*reads)
        raws = [await read for read in reads]
        present = [raw for raw in raws if raw is not None]
        # A wake that failed after it cleared some left them in the archive: every chunk
        # it cleared had been written there first.
        if len(present) == len(raws):

            async def kept() -> bool:
                await put(mark.retired, present)
                return True

            await self._writer.run_typed("retire timeline", kept, step_options(bool))
        for index in indices:
            self._writer.clear(chunk_key(index))
        return TimelineMark(mark.last_seq, mark.chunks, upto)

    def set_running(self, invocation: str, bell: str, queue_bell: str, turn: int) -> None:
        """Name the wake that runs a turn now and its bell (once per wake, and once more
        each time the bell rang). It stays named once the wake returns: the record it
        writes then says it finished (`Reader.running`)."""
        running = RunningWake(invocation, bell, queue_bell, turn)
        if running != self._named:
            self._writer.set(RUNNING, running)
            self._running, self._named = invocation, running

    def write_segment(self, index: int, segment: Segment) -> None:
        """Add segment `index`: kept in the record's copy while the prompt shows it,
        written to its own key once it leaves the copy (`finish`)."""
        self._segments[index] = segment
        self._unkeyed.add(index)

    async def segment(self, index: int) -> Segment | None:
        if index not in self._segments:
            found = await self._writer.get(segment_key(index), type_hint=Segment)
            if found is None:
                return None
            self._segments[index] = found
        return self._segments[index]

    async def recent(self, context: ContextState) -> tuple[Segment, ...]:
        """The segments not folded yet: what the prompt shows verbatim (bounded by the
        fold threshold, so a wake never reads the whole history). All came with the
        record or were added by this wake; any that did not are read at once."""
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

    async def recalled(
        self, query: RecallQuery, command: Recall, context: ContextState
    ) -> list[tuple[int, tuple[ChatMessage, ...]]]:
        """(turn, messages) read back for `recall`: one turn by number, or the newest
        that match."""
        if query.turn is not None:
            if query.turn == command.turn:
                return [(command.turn, command.current)]
            segments = await self.of_turn(query.turn, context)
            messages = tuple(m for s in segments for m in s.messages)
            return [(query.turn, messages)] if messages else []
        found: dict[int, tuple[ChatMessage, ...]] = {}
        if matches(command.current, query.query):
            found[command.turn] = command.current
        last = context.segments - 1
        for index in range(last, max(last - SEARCH_SEGMENTS, -1), -1):
            if len(found) >= MATCHES:
                break
            segment = await self.segment(index)
            if segment is not None and matches(segment.messages, query.query):
                found[segment.turn] = (*segment.messages, *found.get(segment.turn, ()))
        return sorted(found.items())


class Doorbell:
    """The bells of the turn a wake drives (see the module's text)."""

    def __init__(
        self, ctx: restate.ObjectContext, store: Store, done: Awaitable[Any], turn: int
    ) -> None:
        self._ctx, self._store, self._done, self._turn = ctx, store, done, turn
        self.steered: tuple[str, ...] = ()
        """Ids of the messages that joined the turn."""
        self.held: Pause | None = None
        """The pause that held the turn, once one did."""
        bell, first = ctx.awakeable(serde=RAW)
        queue_bell, second = ctx.awakeable(serde=RAW)
        self._bell: Awaitable[bytes] = first
        self._queue_bell: Awaitable[bytes] = second
        self._names = (bell, queue_bell)
        store.set_running(ctx.request().id, *self._names, turn)  # one state write for both

    def _hang(self, which: int) -> Awaitable[bytes]:
        """A new awakeable for bell `which` (0: steer or pause, 1: queue), named in
        `running` with the other."""
        name, future = self._ctx.awakeable(serde=RAW)
        names = list(self._names)
        names[which] = name
        self._names = (names[0], names[1])
        self._store.set_running(self._ctx.request().id, *self._names, self._turn)
        return future

    async def _heard(self, which: int) -> Bell | None:
        future = self._queue_bell if which else self._bell
        if not await rang(future, self._done):
            return None
        bell = msgspec.json.decode(await future, type=Bell)
        if bell.pause is None:
            hung = self._hang(which)
            if which:
                self._queue_bell = hung
            else:
                self._bell = hung
        return bell

    async def between(self) -> tuple[Arrived | Ack, tuple[EventBody, ...]]:
        """The harness's answer at a round boundary, and the events of what was heard."""
        if self.held is not None:
            return Ack(), ()
        queued = await self._heard(1)
        events: tuple[EventBody, ...] = ()
        if queued is not None and queued.message is not None:
            events = (MessageQueued(queued.message.text, queued.message.id, queued.message.user),)
        bell = await self._heard(0)
        if bell is not None and bell.pause is not None:
            self.held = bell.pause
            return Arrived(hold=True), events
        if bell is not None and bell.message is not None:
            message = bell.message
            self.steered = (*self.steered, message.id)
            user = ChatMessage(role="user", content=message.text)
            return Arrived((user,)), (*events, MessageSteered(message.text, message.id))
        return Ack(), events


def ring(ctx: restate.ObjectSharedContext, name: str, bell: Bell) -> None:
    """Ring the bell `name` of a running turn (from a shared handler)."""
    ctx.resolve_awakeable(name, msgspec.json.encode(bell), serde=RAW)


def decoded(raw: bytes | None) -> StoredAgent:
    """The stored value (a new agent's when there is none), in the newest layout."""
    if raw is None:
        return StoredAgent(VERSION)
    try:
        return load(raw)
    except NewerStateError as error:
        raise restate.TerminalError(str(error), status_code=503) from error
