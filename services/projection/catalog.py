"""An agent's catalog row, folded from events alone (no reads).

Each field that depends on one event (status, kind and version, outcome) carries the seq
of the event that decided it; the store merges a batch's row into the stored one field
by field, keeping the one decided at the higher seq, and the maximum of the rest. That
merge is commutative, associative and idempotent, so duplicated and reordered batches
leave the same row as recomputing it from every event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from schemas.address import parse_address
from schemas.events import BODY_TAGS, Event, TurnEnded, TurnStarted

STATUS_BY_EVENT = {
    "turn_started": "running",
    "model_message": "running",
    "tool_called": "running",
    "tool_finished": "running",
    "child_spawned": "running",
    "waiting": "waiting",
    "approval_requested": "waiting",
    "turn_parked": "parked",
    "approval_answered": "running",
    "approval_abandoned": "running",
    "turn_ended": "idle",
    "agent_paused": "paused",
}
"""Which events decide an agent's status; the newest of them wins."""

_STATUS_BY_TYPE: dict[type, str] = {
    body: STATUS_BY_EVENT[tag] for body, tag in BODY_TAGS.items() if tag in STATUS_BY_EVENT
}
"""`STATUS_BY_EVENT` by the body's type: one dict lookup per event, not a walk to its tag."""


class CatalogRow(NamedTuple):
    """One agent's row in the `agents` table, with the seq each field was decided at; its
    fields in the table's column order, so the row is the statement's parameters."""

    address: str
    tenant: str
    kind: str = ""
    spec_version: int = 0
    started_seq: int = 0
    status: str = "idle"
    status_seq: int = 0
    last_outcome: str | None = None
    ended_seq: int = 0
    turn: int = 0
    last_seq: int = 0
    last_activity: str = ""


class _Fold:
    """One agent's row, folded from its events in one pass (a batch holds many)."""

    __slots__ = ("address", "at", "ended", "seq", "started", "status", "status_seq", "turn")

    def __init__(self, first: Event) -> None:
        self.address = first.agent
        self.seq, self.turn, self.at = 0, 0, first.at
        self.status: str | None = None
        self.status_seq = 0
        self.started: Event | None = None
        self.ended: Event | None = None

    def add(self, event: Event) -> None:
        seq = event.seq
        self.seq = max(self.seq, seq)
        self.turn = max(self.turn, event.turn)
        self.at = max(self.at, event.at)
        kind = type(event.body)
        status = _STATUS_BY_TYPE.get(kind)
        if status is not None and seq > self.status_seq:
            self.status, self.status_seq = status, seq
        if kind is TurnStarted:
            if self.started is None or seq > self.started.seq:
                self.started = event
        elif kind is TurnEnded and (self.ended is None or seq > self.ended.seq):
            self.ended = event

    def row(self, decided: Decided | None) -> CatalogRow:
        kind, spec_version, started_seq = "", 0, 0
        last_outcome, ended_seq = None, 0
        status, status_seq = self.status or "idle", self.status_seq
        if decided is not None and status_seq <= decided.seq:
            status, status_seq = decided
        if (event := self.started) is not None and isinstance(event.body, TurnStarted):
            kind, spec_version = event.body.spec_kind, event.body.spec_version
            started_seq = event.seq
        if (event := self.ended) is not None and isinstance(event.body, TurnEnded):
            last_outcome, ended_seq = event.body.outcome, event.seq
        return CatalogRow(
            self.address,
            _tenant(self.address),
            kind,
            spec_version,
            started_seq,
            status,
            status_seq,
            last_outcome,
            ended_seq,
            self.turn,
            self.seq,
            self.at.isoformat(),
        )


def _tenant(address: str) -> str:
    return parse_address(address).tenant


class Decided(NamedTuple):
    """An agent's status as the agent itself decided it (`services.agent.machine.state_of`,
    from its turn's phase), once its events up to `seq` are recorded."""

    status: str
    seq: int


def catalog_rows(
    events: Iterable[Event], decided: Mapping[str, Decided] | None = None
) -> list[CatalogRow]:
    """One row per agent in `events`, by address. A status the agent decided wins over the
    one its events suggest (`STATUS_BY_EVENT`, for batches from older agents and for
    events without one) at the same seq."""
    folds: dict[str, _Fold] = {}
    for event in events:
        fold = folds.get(event.agent)
        if fold is None:
            fold = folds[event.agent] = _Fold(event)
        fold.add(event)
    told = decided or {}
    return [folds[address].row(told.get(address)) for address in sorted(folds)]
