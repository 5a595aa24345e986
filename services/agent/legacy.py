"""Agents whose state was written before the `AgentRecord` (one state key per concern:
`turn`, `summary`, `queue`, `spec`, `answered`, `ledger`): read once, into a record.

The history and the timeline need nothing: the history key and its type are unchanged,
and the old 64-event segments are read as chunks (same keys, same shape). The first wake
after an upgrade builds the record from the old keys and writes it; the old keys are then
never read again.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from schemas.chat import ToolCall
from schemas.events import Outcome
from schemas.harness import (
    AwaitingApproval,
    AwaitingChildren,
    PendingApproval,
    Phase,
    Running,
    TurnState,
)
from schemas.spec import AgentSpec
from schemas.state import AgentRecord, Ledger
from schemas.wake import Message

TURN, SUMMARY, QUEUE, SPEC, ANSWERED, LEDGER = (
    "turn",
    "summary",
    "queue",
    "spec",
    "answered",
    "ledger",
)
KEYS = (TURN, SUMMARY, QUEUE, SPEC, ANSWERED, LEDGER)
T = TypeVar("T")


class OldSummary(msgspec.Struct, frozen=True):
    turns: int = 0
    last_outcome: Outcome | None = None


class OldQueue(msgspec.Struct, frozen=True):
    messages: tuple[Message, ...] = ()


class OldAnswered(msgspec.Struct, frozen=True):
    requests: tuple[str, ...] = ()


class OldPhase(msgspec.Struct, frozen=True):
    """The flags a turn's phase was spread over."""

    waiting: bool = False
    approval: PendingApproval | None = None
    remaining: tuple[ToolCall, ...] = ()
    parked: bool = False


def phase_of(old: OldPhase) -> Phase:
    if old.approval is not None:
        return AwaitingApproval(old.approval, old.remaining, old.parked)
    if old.waiting:
        return AwaitingChildren()
    return Running()


def record_from(values: dict[str, bytes]) -> AgentRecord | None:
    """The record the old keys describe (None when there are none): `values` maps each old
    key that exists to its stored JSON."""
    if not values:
        return None
    summary = _decode(values, SUMMARY, OldSummary) or OldSummary()
    turn = _decode(values, TURN, TurnState)
    if turn is not None:
        old = _decode(values, TURN, OldPhase) or OldPhase()
        turn = msgspec.structs.replace(turn, phase=phase_of(old))
    return AgentRecord(
        turns=summary.turns,
        last_outcome=summary.last_outcome,
        spec=_decode(values, SPEC, AgentSpec),
        turn=turn,
        queue=(_decode(values, QUEUE, OldQueue) or OldQueue()).messages,
        answered=(_decode(values, ANSWERED, OldAnswered) or OldAnswered()).requests,
        ledger=_decode(values, LEDGER, Ledger) or Ledger(),
    )


def _decode(values: dict[str, bytes], key: str, kind: type[T]) -> T | None:
    raw = values.get(key)
    return None if raw is None else msgspec.json.decode(raw, type=kind)
