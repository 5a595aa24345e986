"""What an agent keeps in its Restate object state between wakes."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage
from schemas.events import Event, Outcome
from schemas.wake import Message


class History(msgspec.Struct, frozen=True):
    """Messages of finished turns, oldest first."""

    messages: tuple[ChatMessage, ...] = ()


class Queue(msgspec.Struct, frozen=True):
    """Messages that arrived while a turn was in progress, in arrival order."""

    messages: tuple[Message, ...] = ()


class Summary(msgspec.Struct, frozen=True):
    turns: int = 0
    """Turns started so far; the next turn is `turns + 1`."""
    last_outcome: Outcome | None = None
    last_reply: str = ""


class TimelineMeta(msgspec.Struct, frozen=True):
    last_seq: int = 0


class Segment(msgspec.Struct, frozen=True):
    """A bounded slice of the timeline: events with seq in
    (index * SEGMENT_SIZE, (index + 1) * SEGMENT_SIZE]."""

    events: tuple[Event, ...] = ()


SEGMENT_SIZE = 64


class Ledger(msgspec.Struct, frozen=True):
    """Model tokens charged to the agent, per UTC day. A call's estimate is reserved before
    it runs and replaced by what it used after; the state write and the call are in one
    journal, so a crash between them neither loses nor doubles a charge."""

    day: str = ""
    day_tokens: int = 0
    reserved: int = 0
    """Tokens reserved by the model call in flight (0 when none is)."""


class Answered(msgspec.Struct, frozen=True):
    """Recently answered approval requests, so a second answer gets a clear error."""

    requests: tuple[str, ...] = ()
    ended: tuple[str, ...] = ()
    """Those of `requests` abandoned when their turn ended unanswered."""
