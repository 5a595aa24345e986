"""A fork, pure: what a new agent that begins as another's first `seq` events holds.

The fork's timeline is the source's events up to `seq` (the same seqs, turns, rounds and
times, under the fork's address), then `agent_forked`. Its history (what its prompts show)
is the source's segments of the turns that had ended by `seq`; a turn still in progress at
`seq` is on the timeline but not in the history, and the fork starts idle, its next turn
numbered after every turn the copied events name. The fold summaries kept are those of
turns the fork holds, and the segments they summarise stay folded.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from schemas.context import ContextState, Segment
from schemas.events import AgentForked, ContextFolded, Event, TurnEnded, TurnStarted
from schemas.lifecycle import ForkSource
from schemas.spec import AgentSpec
from schemas.state import AgentRecord, Chunk, TimelineMark
from services.agent.timeline import CHUNK_EVENTS


class ForkError(ValueError):
    """A fork that cannot be made; the message is a sentence, `status` its HTTP status."""

    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status


def source_of(
    events: Sequence[Event],
    seq: int,
    *,
    last_seq: int,
    context: ContextState,
    segments: Sequence[Segment],
    held: Sequence[AgentSpec],
) -> ForkSource:
    """What a fork at `seq` takes from a source whose timeline ends at `last_seq`:
    `events` its first events (at least up to `seq`), `segments` its history from
    `history.0`, `held` the specs it holds (its own and its turn's)."""
    if seq < 1 or seq > last_seq:
        raise ForkError(
            422, f"seq must be from 1 to {last_seq}, the source's newest event; got {seq}"
        )
    kept = [e for e in events if e.seq <= seq]
    started = [e.body for e in kept if isinstance(e.body, TurnStarted)]
    ended = [e for e in kept if isinstance(e.body, TurnEnded)]
    last_turn = last_ended(kept, seq)
    outcome = ended[-1].body.outcome if ended and isinstance(ended[-1].body, TurnEnded) else None
    kind, version = (started[-1].spec_kind, started[-1].spec_version) if started else ("", 0)
    spec = next((s for s in held if (s.kind, s.version) == (kind, version)), None)
    if not started and held:
        spec = held[0]
        kind, version = spec.kind, spec.version
    folds = sum(isinstance(e.body, ContextFolded) and e.body.last_turn <= last_turn for e in kept)
    cut, history = forked_context(context, segments, last_turn, folds)
    return ForkSource(
        last_seq,
        max((e.turn for e in kept), default=0),
        outcome,
        kind,
        version,
        spec,
        cut,
        history,
    )


def forked_context(
    context: ContextState, segments: Sequence[Segment], last_turn: int, folds: int
) -> tuple[ContextState, tuple[Segment, ...]]:
    """The source's history cut after turn `last_turn`: the segments of the turns up to
    it, the fold summaries of those turns, the segments they summarise still folded."""
    history = tuple(s for s in segments if s.turn <= last_turn)
    blocks = tuple(b for b in context.blocks if b.last_turn <= last_turn)
    covered = blocks[-1].last_turn if blocks else 0
    folded = sum(s.turn <= covered for s in history) if blocks else 0
    cut = msgspec.structs.replace(
        context, segments=len(history), folded=folded, folds=folds, blocks=blocks
    )
    return cut, history


def forked_events(
    events: Sequence[Event], address: str, found: ForkSource, forked: AgentForked, at: datetime
) -> list[Event]:
    """The fork's timeline: the source's events up to the fork's seq under `address`,
    then `agent_forked` at `at`."""
    copied = [msgspec.structs.replace(e, agent=address) for e in events if e.seq <= forked.seq]
    if [e.seq for e in copied] != list(range(1, forked.seq + 1)):
        raise ForkError(503, f"{forked.source}'s timeline could not be read up to {forked.seq}")
    return [*copied, Event(address, forked.seq + 1, found.turns, 0, at, forked)]


def last_ended(events: Sequence[Event], seq: int) -> int:
    """The last turn that ended at or before `seq` (0: none did)."""
    ended = [e.turn for e in events if e.seq <= seq and isinstance(e.body, TurnEnded)]
    return ended[-1] if ended else 0


def chunks_of(events: Sequence[Event]) -> list[Chunk]:
    """The events as the timeline's chunks: `CHUNK_EVENTS` to a chunk."""
    return [Chunk(tuple(events[i : i + CHUNK_EVENTS])) for i in range(0, len(events), CHUNK_EVENTS)]


def forked_record(found: ForkSource, spec: AgentSpec, events: Sequence[Event]) -> AgentRecord:
    """The fork's record: idle, with the source's turns, spec and history up to the cut."""
    mark = TimelineMark(events[-1].seq, len(chunks_of(events)))
    return AgentRecord(
        turns=found.turns,
        last_outcome=found.last_outcome,
        spec=spec,
        timeline=mark,
        context=found.context,
    )
