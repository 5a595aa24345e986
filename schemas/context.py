"""The agent's history as the context engine keeps it: segments written once, fold
summaries, and the marks that say which turns the prompt shows verbatim.

Evolving this schema: add optional fields with defaults only (old payloads must decode).
"""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage


class Segment(msgspec.Struct, frozen=True):
    """The messages one finished turn added to the history (or a late child's report),
    written once and never rewritten."""

    turn: int
    messages: tuple[ChatMessage, ...]


class Recent(msgspec.Struct, frozen=True):
    """A copy of the segments the prompt shows verbatim (`history.{first}` on), kept in
    one value so that a wake reads them together with its record."""

    first: int
    segments: tuple[Segment, ...]

    @property
    def indices(self) -> range:
        """The segments' indices, `history.{first}` on."""
        return range(self.first, self.first + len(self.segments))


class FoldBlock(msgspec.Struct, frozen=True):
    """A summary of folded turns, shown to the model in place of their messages."""

    first_turn: int
    last_turn: int
    summary: str


class ContextState(msgspec.Struct, frozen=True):
    """Where the agent's history stands: bounded, whatever the number of turns."""

    segments: int = 0
    """Segments written: keys `history.0` to `history.{segments - 1}`."""
    folded: int = 0
    """Segments before this index are folded: the prompt shows their summary instead."""
    folds: int = 0
    """Folds made so far."""
    blocks: tuple[FoldBlock, ...] = ()
    """The newest fold summaries, oldest first, as many as the summary layer holds."""
    window: int = 0
    """The model's context window in tokens, as its executor last reported it (0: never)."""
    prompt_tokens: int = 0
    prompt_chars: int = 0
    """The last model call's prompt, as the executor counted it in tokens and as the
    harness measured it in characters: the ratio the next estimate uses."""
