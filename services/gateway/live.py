"""Live token deltas: the text of each round in progress, kept until it is recorded.

Pure state, no I/O. `LiveRounds` is the gateway's copy per agent: it appends only what is
new (a delta's `offset` tells a repeat from a gap), ignores a gap (its answer says what it
holds, and the executor re-sends from there, so the text arrives in one larger piece), and
takes a round's text back when a new attempt of the round starts. `LiveView` is what one
follower has been shown, so that each follower's stream stays contiguous however it
joined. A round is forgotten once its `model_message` (or its turn's end) is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from schemas.events import Event, ModelMessage, TurnEnded
from schemas.live import LiveDelta, Retraction

RoundKey = tuple[int, int]
"""(turn, round): ordered as the agent runs them."""

WHOLE_TURN = 1 << 62
"""A round number above every real one: a turn's end supersedes all its rounds."""


LiveItem = LiveDelta | Retraction


def key_of(item: LiveItem) -> RoundKey:
    return item.turn, item.round


def recorded_round(event: Event) -> RoundKey | None:
    """The newest round an event supersedes the live text of, if it supersedes any."""
    if isinstance(event.body, ModelMessage):
        return event.turn, event.round
    if isinstance(event.body, TurnEnded):
        return event.turn, WHOLE_TURN
    return None


def fresh_part(have: int, delta: LiveDelta) -> str | None:
    """What `delta` adds beyond the first `have` characters: '' for a repeat, None for a gap."""
    if delta.offset > have:
        return None
    return delta.text[have - delta.offset :]


@dataclass
class _Round:
    attempt: str
    touched: float
    pieces: list[str] = field(default_factory=list)
    length: int = 0
    retired: set[str] = field(default_factory=set)

    def restart(self, attempt: str, now: float) -> None:
        self.retired.add(self.attempt)
        self.attempt, self.touched, self.pieces, self.length = attempt, now, [], 0

    def text(self) -> str:
        return "".join(self.pieces)


class LiveRounds:
    """One agent's rounds in progress, as the gateway received them."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.done: RoundKey = (0, 0)
        self._rounds: dict[RoundKey, _Round] = {}

    def __bool__(self) -> bool:
        return bool(self._rounds)

    def apply(self, delta: LiveDelta, now: float) -> list[LiveItem]:
        """What followers are to be sent for `delta`: nothing, or a trimmed delta, after a
        retraction when it starts a new attempt."""
        key = key_of(delta)
        if key <= self.done:
            return []
        current = self._rounds.setdefault(key, _Round(delta.attempt, now))
        if delta.attempt in current.retired:
            return []
        items: list[LiveItem] = []
        if delta.attempt != current.attempt:
            current.restart(delta.attempt, now)
            items.append(Retraction(self.agent, *key))
        part = fresh_part(current.length, delta)
        if part:
            items.append(msgspec.structs.replace(delta, offset=current.length, text=part))
            current.pieces.append(part)
            current.length += len(part)
            current.touched = now
        return items

    def held(self, delta: LiveDelta) -> int:
        """How far the execution plane may go on from after `delta`: the length of the
        round's text this gateway holds, less than the delta's end when it came after a
        gap (so the rest is sent again from there), and all of it when no more is wanted
        (the round is recorded, or that attempt taken back)."""
        end = delta.offset + len(delta.text)
        current = self._rounds.get(key_of(delta))
        if current is None or delta.attempt != current.attempt:
            return end
        return current.length

    def supersede(self, key: RoundKey) -> None:
        self.done = max(self.done, key)
        for old in [k for k in self._rounds if k <= self.done]:
            del self._rounds[old]

    def snapshot(self) -> list[LiveDelta]:
        """Each round's text so far as one delta, for a follower who joins mid-round."""
        return [
            LiveDelta(self.agent, turn, round_, r.attempt, 0, r.text())
            for (turn, round_), r in sorted(self._rounds.items())
            if r.length
        ]

    def expire(self, now: float, ttl: float) -> None:
        """Forget rounds that went quiet without being recorded (a crashed attempt)."""
        for key in [k for k, r in self._rounds.items() if now - r.touched > ttl]:
            del self._rounds[key]


class LiveView:
    """What one follower has been shown: each round's attempt and length."""

    def __init__(self) -> None:
        self.done: RoundKey = (0, 0)
        self._shown: dict[RoundKey, tuple[str, int]] = {}

    def recorded(self, event: Event) -> None:
        key = recorded_round(event)
        if key is not None and key > self.done:
            self.done = key
            for old in [k for k in self._shown if k <= key]:
                del self._shown[old]

    def show(self, item: LiveItem) -> list[LiveItem]:
        """The items to send this follower for `item`, trimmed so nothing repeats."""
        key = key_of(item)
        if key <= self.done:
            return []
        if isinstance(item, Retraction):
            self._shown.pop(key, None)
            return [item]
        attempt, have = self._shown.get(key, (item.attempt, 0))
        items: list[LiveItem] = []
        if attempt != item.attempt:
            items.append(Retraction(item.agent, *key))
            have = 0
            self._shown[key] = (item.attempt, 0)
        part = fresh_part(have, item)
        if part:
            items.append(msgspec.structs.replace(item, offset=have, text=part))
            self._shown[key] = (item.attempt, have + len(part))
        return items
