"""What an agent keeps in its Restate object state between wakes.

Three kinds of value, so that no write rewrites a growing value:
- `StoredAgent`: bounded; read once at the start of a wake, written once at its end: the
  machine's `AgentRecord`, and beside it a copy of the history segments not folded yet
  (bounded by the fold threshold);
- `Chunk`: the events of one flush, written once and never rewritten;
- `Segment`: the messages of one finished turn, written once as `history.{n}` and never
  rewritten; the record's `ContextState` says how many there are and which are folded.
"""

from __future__ import annotations

import msgspec

from schemas.context import ContextState, Recent
from schemas.events import Event, Outcome
from schemas.harness import TurnState
from schemas.spec import AgentSpec
from schemas.wake import Message, Pause


class Ledger(msgspec.Struct, frozen=True):
    """Model tokens charged to the agent, per UTC day. A call's estimate is reserved before
    it runs and replaced by what it used after; the record that holds the ledger and the
    call are in one journal, so a crash between them neither loses nor doubles a charge."""

    day: str = ""
    day_tokens: int = 0
    reserved: int = 0
    """Tokens reserved by the model call in flight (0 when none is)."""


class TimelineMark(msgspec.Struct, frozen=True):
    """How far the timeline had got when the record was last written. Chunks a running
    wake wrote since are found by reading on from `chunks`."""

    last_seq: int = 0
    chunks: int = 0
    """Chunks written: keys `timeline.0` to `timeline.{chunks - 1}`."""
    retired: int = 0
    """The first chunks, `timeline.0` to `timeline.{retired - 1}`, moved out of the state
    to the archive store (timeline retention): read from there."""


class Chunk(msgspec.Struct, frozen=True):
    """Events of one flush, in seq order, contiguous with the chunk before."""

    events: tuple[Event, ...]


KEEP_ANSWERED = 100
"""Approval requests remembered as answered, so that a second answer gets a clear 409."""


class AgentRecord(msgspec.Struct, frozen=True):
    """The agent's bounded state: everything a wake decides on but the history segments."""

    turns: int = 0
    """Turns started so far; the next turn is `turns + 1`."""
    last_outcome: Outcome | None = None
    spec: AgentSpec | None = None
    """The spec the agent's next turn runs with, unless its message names another."""
    turn: TurnState | None = None
    """The turn in progress, if any."""
    queue: tuple[Message, ...] = ()
    """Messages that arrived while a turn waited for its children (or while the agent
    was paused), in arrival order."""
    paused: bool = False
    """Paused: nothing runs (no turn starts, none goes on) until the agent is resumed."""
    steered: tuple[str, ...] = ()
    """Ids of the latest `KEEP_ANSWERED` messages that joined a running turn: each also
    arrives as a wake of its own, which then does nothing."""
    answered: tuple[str, ...] = ()
    """The latest `KEEP_ANSWERED` approval requests that were answered or abandoned."""
    abandoned: tuple[str, ...] = ()
    """Those of `answered` that were abandoned: their turn ended before an answer came."""
    ledger: Ledger = Ledger()
    timeline: TimelineMark = TimelineMark()
    context: ContextState = ContextState()


class StoredAgent(msgspec.Struct, frozen=True):
    """The value of the `agent` key: the machine's record in a storage envelope that only
    the store reads (the machine never sees `recent` or `finished`)."""

    version: int
    """The layout this value was written in (`services/agent/migrations.py`)."""
    record: AgentRecord = AgentRecord()
    recent: Recent | None = None
    """A copy of the history segments the prompt shows verbatim (`context.folded` on), so
    that a wake reads them with its record, in one state read."""
    finished: str = ""
    """The invocation id of the last wake that ran a turn and returned. Such a wake leaves
    `running` naming it (clearing it would cost a journal entry per wake): a turn is
    running while `running` names another."""


class RunningWake(msgspec.Struct, frozen=True):
    """The value of the `running` key: the wake that runs a turn now (or ran the last
    one), and the awakeables it listens to at each round boundary (`Bell`): `bell` for a
    message that steers or a pause, `queue_bell` for a message that queues behind it."""

    invocation: str
    bell: str = ""
    queue_bell: str = ""
    turn: int = 0
    """The turn it drives; 0 in a value written before the number was kept."""


class Bell(msgspec.Struct, frozen=True):
    """What rings a running turn's bell: a message that joins it (`while_busy: steer`),
    or a pause; on its queue bell, a message that queues behind it (the turn records
    `message_queued`, so the agent's queue counts it). The turn hears it at its next
    round boundary."""

    message: Message | None = None
    pause: Pause | None = None
