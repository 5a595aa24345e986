"""An agent's catalog row, folded from events alone (no reads).

Each field that depends on one event (status, kind and version, outcome) carries the seq
of the event that decided it; merging two rows keeps, field by field, the one decided at
the higher seq, and the maximum of the rest. That merge is commutative, associative and
idempotent, so duplicated and reordered batches leave the same row as recomputing it
from every event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class CatalogRow:
    """One agent's row in the `agents` table, with the seq each field was decided at."""

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

    def merge(self, other: CatalogRow) -> CatalogRow:
        """Both rows' knowledge together (the same rules as the SQL upsert in the store)."""
        newer = dataclasses.replace
        row = newer(
            self,
            turn=max(self.turn, other.turn),
            last_seq=max(self.last_seq, other.last_seq),
            last_activity=max(self.last_activity, other.last_activity),
        )
        if other.started_seq > row.started_seq:
            row = newer(
                row, kind=other.kind, spec_version=other.spec_version, started_seq=other.started_seq
            )
        if other.status_seq > row.status_seq:
            row = newer(row, status=other.status, status_seq=other.status_seq)
        if other.ended_seq > row.ended_seq:
            row = newer(row, last_outcome=other.last_outcome, ended_seq=other.ended_seq)
        return row


def row_of(event: Event) -> CatalogRow:
    """What one event says about its agent's row."""
    tag = str(event.body.__struct_config__.tag)
    row = CatalogRow(
        event.agent,
        parse_address(event.agent).tenant,
        turn=event.turn,
        last_seq=event.seq,
        last_activity=event.at.isoformat(),
    )
    if tag in STATUS_BY_EVENT:
        row = dataclasses.replace(row, status=STATUS_BY_EVENT[tag], status_seq=event.seq)
    body = event.body
    if isinstance(body, TurnStarted):
        row = dataclasses.replace(
            row, kind=body.spec_kind, spec_version=body.spec_version, started_seq=event.seq
        )
    elif isinstance(body, TurnEnded):
        row = dataclasses.replace(row, last_outcome=body.outcome, ended_seq=event.seq)
    return row


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
    rows: dict[str, CatalogRow] = {}
    for event in events:
        row = row_of(event)
        known = rows.get(event.agent)
        rows[event.agent] = row if known is None else known.merge(row)
    for agent, (status, seq) in (decided or {}).items():
        if agent in rows:
            told = dataclasses.replace(rows[agent], status=status, status_seq=seq)
            rows[agent] = told if rows[agent].status_seq <= seq else rows[agent]
    return [rows[address] for address in sorted(rows)]
