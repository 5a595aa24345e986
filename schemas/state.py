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
