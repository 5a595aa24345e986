"""Following a timeline over SSE, sans I/O: frames parsed from lines, decoded into typed
items, and a cursor that makes a reconnect resume with `Last-Event-ID` so that every
recorded event is yielded once and each round's live text stays contiguous."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from schemas.events import Event, ModelMessage, TurnEnded
from schemas.live import LiveDelta, Retraction
from services.client.models import Item

WHOLE_TURN = 1 << 62


@dataclass
class Frame:
    event: str = "message"
    data: str = ""
    id: str | None = None


class FrameParser:
    """Lines of an SSE stream in, whole frames out (comments and keepalives dropped)."""

    def __init__(self) -> None:
        self._fields: dict[str, str] = {}

    def line(self, text: str) -> Frame | None:
        if text:
            if not text.startswith(":"):
                name, _, value = text.partition(":")
                value = value.removeprefix(" ")
                if name == "data" and "data" in self._fields:
                    value = f"{self._fields['data']}\n{value}"
                self._fields[name] = value
            return None
        fields, self._fields = self._fields, {}
        if "data" not in fields:
            return None
        return Frame(fields.get("event", "message"), fields["data"], fields.get("id"))


def decode(frame: Frame) -> Item | None:
    """The typed item a frame carries; None for a kind this client does not know."""
    if frame.event == "delta":
        return msgspec.json.decode(frame.data, type=LiveDelta)
    if frame.event == "retract":
        return msgspec.json.decode(frame.data, type=Retraction)
    if frame.id is None:
        return None
    return msgspec.json.decode(frame.data, type=Event)


@dataclass
class Cursor:
    """Where a follower is: the last recorded seq it yielded, and the live text of each
    round in progress. `admit` says what to hand on for each item received: nothing for a
    repeat, the new part of a delta, a retraction before the text of a new attempt."""

    last: int = 0
    done: tuple[int, int] = (0, 0)
    live: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)

    @property
    def last_event_id(self) -> str:
        return str(self.last)

    def admit(self, item: Item) -> list[Item]:
        if isinstance(item, Event):
            return self._event(item)
        key = (item.turn, item.round)
        if key <= self.done:
            return []
        if isinstance(item, Retraction):
            self.live.pop(key, None)
            return [item]
        return self._delta(key, item)

    def _event(self, event: Event) -> list[Item]:
        if event.seq <= self.last:
            return []
        self.last = event.seq
        ended = _superseded_round(event)
        if ended is not None and ended > self.done:
            self.done = ended
            self.live = {k: v for k, v in self.live.items() if k > ended}
        return [event]

    def _delta(self, key: tuple[int, int], delta: LiveDelta) -> list[Item]:
        items: list[Item] = []
        attempt, have = self.live.get(key, (delta.attempt, 0))
        if attempt != delta.attempt:
            items.append(Retraction(delta.agent, *key))
            attempt, have = delta.attempt, 0
            self.live[key] = (attempt, have)
        fresh = delta.text[have - delta.offset :] if delta.offset <= have else ""
        if fresh:
            self.live[key] = (attempt, have + len(fresh))
            items.append(msgspec.structs.replace(delta, offset=have, text=fresh))
        return items


def _superseded_round(event: Event) -> tuple[int, int] | None:
    if isinstance(event.body, ModelMessage):
        return event.turn, event.round
    if isinstance(event.body, TurnEnded):
        return event.turn, WHOLE_TURN
    return None
