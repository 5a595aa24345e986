"""What crosses into and out of the projection: the batches the projector receives, its
notices to gateways after a commit (which agents' timelines grew), a rebuild's report.

A notice is a hint, never data: a gateway that receives it reads the events from the
projection, so a lost, repeated or reordered notice costs latency at most, never an event.
"""

from __future__ import annotations

import msgspec

from schemas.events import AgentState, Event


class EventBatch(msgspec.Struct, frozen=True):
    """Events one agent appended in one flush, in seq order."""

    events: tuple[Event, ...]
    status: AgentState
    """The agent's status once these events are recorded."""


class Projected(msgspec.Struct, frozen=True):
    agent: str
    last_seq: int
    """The newest seq of the agent in the commit (the projection may still have gaps)."""


class ProjectedBatch(msgspec.Struct, frozen=True):
    agents: tuple[Projected, ...]


class RebuildReport(msgspec.Struct, frozen=True):
    agents: int
    events: int
    specs: int
    keys: int
    documents: int = 0
    memories: int = 0


class VectorFill(msgspec.Struct, frozen=True):
    """Asked of the `Projector` (keyed `<tenant>:vectors`): make the vectors the tenant's
    memory records and passages lack. `retry`: the one later attempt scheduled after the
    embeddings server failed."""

    tenant: str
    retry: bool = False


class VectorsFilled(msgspec.Struct, frozen=True):
    """What one fill made (`made` vectors), and why it stopped short (`problem`, a
    sentence; empty when nothing is left to make)."""

    made: int = 0
    problem: str = ""
    more: bool = False
    """It stopped at its most batches with rows left: another fill follows at once."""


class TenantNames(msgspec.Struct, frozen=True):
    names: tuple[str, ...] = ()
