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
from schemas.events import Event, TurnEnded, TurnStarted

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
}
"""Which events decide an agent's status; the newest of them wins."""


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

    __slots__ = ("address", "at", "ended", "seq", "started", "status", "turn")

    def __init__(self, first: Event) -> None:
        self.address = first.agent
        self.seq, self.turn, self.at = first.seq, first.turn, first.at
        self.status: Event | None = None
        self.started: Event | None = None
        self.ended: Event | None = None

    def add(self, event: Event) -> None:
        self.seq = max(self.seq, event.seq)
        self.turn = max(self.turn, event.turn)
        self.at = max(self.at, event.at)
        if event.body.__struct_config__.tag in STATUS_BY_EVENT:
            self.status = _newer(self.status, event)
        if isinstance(event.body, TurnStarted):
            self.started = _newer(self.started, event)
        elif isinstance(event.body, TurnEnded):
            self.ended = _newer(self.ended, event)

    def row(self) -> CatalogRow:
        kind, spec_version, started_seq = "", 0, 0
        status, status_seq = "idle", 0
        last_outcome, ended_seq = None, 0
        if (event := self.status) is not None:
            status, status_seq = STATUS_BY_EVENT[str(event.body.__struct_config__.tag)], event.seq
        if (event := self.started) is not None and isinstance(event.body, TurnStarted):
            kind, spec_version = event.body.spec_kind, event.body.spec_version
            started_seq = event.seq
        if (event := self.ended) is not None and isinstance(event.body, TurnEnded):
            last_outcome, ended_seq = event.body.outcome, event.seq
        return CatalogRow(
            self.address,
            parse_address(self.address).tenant,
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


def _newer(known: Event | None, event: Event) -> Event:
    return event if known is None or event.seq > known.seq else known


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
    rows = {agent: fold.row() for agent, fold in folds.items()}
    for agent, (status, seq) in (decided or {}).items():
        if agent in rows and rows[agent].status_seq <= seq:
            rows[agent] = rows[agent]._replace(status=status, status_seq=seq)
    return [rows[address] for address in sorted(rows)]
