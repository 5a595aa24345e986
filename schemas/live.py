"""Live token deltas: text as the model writes it, before the round is recorded.

Deltas are not journaled. They travel from the execution plane to the gateway and on to
followers; the `model_message` event recorded at the end of the round supersedes them.
`offset` counts characters from the start of the round's text, so a follower can tell a
repeat from a gap; a new `attempt` for the same round means the text so far is taken back.
"""

from __future__ import annotations

import msgspec


class LiveDelta(msgspec.Struct, frozen=True):
    agent: str
    turn: int
    round: int
    attempt: str
    """Differs between a round's attempts (a retry or a fallback restarts the text)."""
    offset: int
    text: str


class Retraction(msgspec.Struct, frozen=True):
    """The text shown so far for this round is taken back; the round streams again."""

    agent: str
    turn: int
    round: int


class LiveBatch(msgspec.Struct, frozen=True):
    deltas: tuple[LiveDelta, ...]
