"""A turn's bookkeeping as it is driven, pure: the wake's clock, the turn's round, usage
and running time, the daily ledger, the history's marks, and the events a step's result
makes. The driver keeps one `Clock` per wake and one `Books` per drive of a turn, and
replaces them with what these functions return; nothing here does I/O or reads a clock
(times come from the journaled steps).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec

from schemas.context import ContextState
from schemas.events import ContextFolded, EventBody, ModelFallback, ModelMessage
from schemas.harness import CallModel, RecordFold, TurnState
from schemas.model import ModelReply, Usage
from schemas.state import Ledger
from services.agent.pipeline import after_model
from services.harness.context import observed


@dataclass(frozen=True)
class Clock:
    """The times a wake has seen: each step stamps its start and end inside the step, so
    a replay reads the same ones back."""

    first: float | None = None
    now: float | None = None

    def saw(self, *times: float) -> Clock:
        seen = [at for at in times if at]  # a result may carry no time (a workspace tool's)
        if not seen:
            return self
        first = min(seen) if self.first is None else min(self.first, *seen)
        now = max(seen) if self.now is None else max(self.now, *seen)
        return Clock(first, now)


@dataclass(frozen=True)
class Books:
    """One drive of a turn: the turn as it goes, the daily ledger, the history's marks."""

    turn: TurnState
    ledger: Ledger
    context: ContextState
    since: float | None = None
    """When this drive began (the wake's latest time then)."""
    spawns: int = 0
    """Children this drive started."""
    lent: int = 0
    """Agents of the message's budget this drive's children took (each one and its share)."""

    def active(self, clock: Clock) -> float:
        """The turn's running seconds: those of earlier wakes, and this drive's so far."""
        since = self.since if self.since is not None else clock.first
        now = clock.now
        extra = now - since if now is not None and since is not None else 0.0
        return self.turn.active_seconds + extra

    def spent(self, clock: Clock, turn: TurnState | None = None) -> TurnState:
        """`turn` (the one kept, by default) with the running seconds counted."""
        return msgspec.structs.replace(turn or self.turn, active_seconds=self.active(clock))

    def spawned(self, share: int) -> Books:
        """A child was started with `share` of the budget (`grants.spawn_refusal`)."""
        return replace(self, spawns=self.spawns + 1, lent=self.lent + share + 1)

    def at_round(self, round_: int) -> Books:
        return replace(self, turn=msgspec.structs.replace(self.turn, round=round_))

    def reserved(self, ledger: Ledger) -> Books:
        """The ledger with a model call's estimate reserved (`Pipeline.before_model`)."""
        return replace(self, ledger=ledger)

    def replied(self, reply: ModelReply) -> Books:
        """A model step returned (a round's or a fold's summary): its usage on the turn,
        and on the day it finished."""
        usage = add(self.turn.usage, reply.usage)
        return replace(
            self,
            turn=msgspec.structs.replace(self.turn, usage=usage),
            ledger=after_model(self.ledger, reply.usage, reply.finished),
        )

    def observed(self, prompt_chars: int, reply: ModelReply) -> Books:
        return replace(self, context=observed(self.context, prompt_chars, reply))

    def folded(self, command: RecordFold) -> tuple[Books, ContextFolded]:
        """The history's marks after a fold (the window and last count kept), and its
        event."""
        context = msgspec.structs.replace(
            command.context,
            window=self.context.window,
            prompt_tokens=self.context.prompt_tokens,
            prompt_chars=self.context.prompt_chars,
        )
        block = command.block
        event = ContextFolded(
            block.first_turn,
            block.last_turn,
            block.summary,
            command.tokens_before,
            command.tokens_after,
            command.model,
            not command.model,
            command.reason,
        )
        return replace(self, context=context), event


def add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.cached_tokens + b.cached_tokens,
    )


def model_events(command: CallModel, reply: ModelReply) -> tuple[EventBody, ...]:
    """What a round's model step puts on the timeline: its fallbacks, then its message."""
    message = reply.message
    fallbacks = tuple(ModelFallback(f.model, f.next, f.reason) for f in reply.fallbacks)
    body = ModelMessage(
        reply.model or command.request.model,
        message.content,
        message.tool_calls,
        reply.usage,
        reply.timing,
        fingerprint=command.fingerprint,
        folds_fingerprint=command.folds_fingerprint,
        memories=command.memories,
    )
    return (*fallbacks, body)
