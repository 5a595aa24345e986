"""What a wake's reaction is made of: the machine's inputs (a wake, or what an effect
produced) and the effects the driver performs (`machine.py` decides, `driver.py` does)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from schemas.context import ContextState, Segment
from schemas.events import EventBody, FailedBy, Outcome, TurnStarted
from schemas.harness import TurnState
from schemas.spec import AgentSpec
from schemas.state import AgentRecord, Ledger
from schemas.wake import Message, Pause, Wake


@dataclass(frozen=True)
class SpecFound:
    """The answer to `FindSpec`: the newest published spec of a kind, or None."""

    message: Message
    spec: AgentSpec | None
    direct: bool


@dataclass(frozen=True)
class TurnRan:
    """The answer to `Drive`: the turn as the harness left it. `ending` is None when the
    turn paused (its phase says for what)."""

    turn: TurnState
    ending: tuple[Outcome, str] | None
    ledger: Ledger | None = None
    """The daily ledger after the turn's model calls (None: unchanged)."""
    context: ContextState | None = None
    """The history's marks after the turn's folds and model calls (None: unchanged)."""
    steered: tuple[str, ...] = ()
    """Ids of the messages that joined the turn while it ran."""
    held: Pause | None = None
    """Set when a pause held the turn at a round boundary (`ending` is None then)."""
    failed_by: FailedBy = ""
    """For a failed ending, what failed (`TurnEnded.failed_by`)."""


@dataclass(frozen=True)
class TurnStopped:
    """`Drive` was cancelled by a stop; `turn` carries the round and usage it reached."""

    turn: TurnState
    ledger: Ledger | None = None
    context: ContextState | None = None
    steered: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unfunded:
    """The turn `start` would begin may not: the tenant's day or the agent's is used.
    No turn exists; the message is refused with `sentence`."""

    start: Start
    sentence: str


Input = Wake | SpecFound | TurnRan | TurnStopped | Unfunded

# --- effects ----------------------------------------------------------------------


@dataclass(frozen=True)
class Emit:
    """Append events to the timeline."""

    turn: int
    round: int
    bodies: tuple[EventBody, ...]


@dataclass(frozen=True)
class SendWake:
    """A one-way wake to an agent (this one, a child or a parent)."""

    address: str
    wake: Wake
    key: str | None = None
    delay: timedelta | None = None


@dataclass(frozen=True)
class FindSpec:
    """Look up the newest published spec of `kind`; answered with `SpecFound`."""

    message: Message
    kind: str
    direct: bool


@dataclass(frozen=True)
class Start:
    """A turn a message starts: the funding rule is decided before `started` is
    recorded (`funding.py`)."""

    message: Message
    started: TurnStarted
    direct: bool
    """Whether the message's sender waits for this wake (it gets the refusal's status)."""


@dataclass(frozen=True)
class Drive:
    """Run the turn's rounds until it pauses or ends; answered with `TurnRan` (or
    `TurnStopped`). A drive that starts its turn (`start`) may be answered `Unfunded`
    instead, before anything of the turn is recorded."""

    turn: TurnState
    start: Start | None = None


@dataclass(frozen=True)
class Remember:
    """Write history segment `index` (once): messages later turns see."""

    index: int
    segment: Segment


@dataclass(frozen=True)
class RefuseWake:
    """Answer the wake's sender with an error; nothing else of this input happens."""

    status: int
    sentence: str


Effect = Emit | SendWake | FindSpec | Drive | Remember | RefuseWake


@dataclass(frozen=True)
class Reaction:
    """The new record and what to do. An effect that answers (`FindSpec`, `Drive`) or
    ends the wake (`RefuseWake`) is always the last one."""

    record: AgentRecord
    effects: tuple[Effect, ...] = ()
    reply: str | None = None
    """Set when a turn ended: its final reply if it succeeded, else empty."""
    note: str = ""
