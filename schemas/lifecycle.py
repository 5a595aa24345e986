"""What a fork, an erasure and a backup are made of, across the services' boundaries.

Evolving this schema: add optional fields with defaults only (old payloads must decode).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from schemas.context import ContextState, Segment
from schemas.events import Outcome
from schemas.memory import MemoryScope
from schemas.spec import AgentSpec


class ForkRequest(msgspec.Struct, frozen=True):
    """Sent to the new agent's `fork`: begin as `source`'s first `seq` events."""

    source: str
    seq: int
    by: str = ""


class ForkQuery(msgspec.Struct, frozen=True):
    """Asked of the source's shared `fork_source`: what its history holds up to `seq`."""

    seq: int


class ForkSource(msgspec.Struct, frozen=True):
    """What a fork at `seq` takes from its source besides the events themselves."""

    last_seq: int
    """The source's timeline end when it was asked (a fork past it is refused)."""
    turns: int = 0
    """The highest turn number among the events up to `seq`: the fork's next turn is one more."""
    last_outcome: Outcome | None = None
    """The outcome of the last turn that ended at or before `seq`."""
    spec_kind: str = ""
    spec_version: int = 0
    """The spec the last turn up to `seq` started with."""
    spec: AgentSpec | None = None
    """That spec, when the source still holds that version (else the tenant is asked)."""
    context: ContextState = ContextState()
    """The fork's history marks: the source's, cut after the last turn ended by `seq`."""
    segments: tuple[Segment, ...] = ()
    """The fork's history segments, `history.0` on."""


class WorkspaceFork(msgspec.Struct, frozen=True):
    """The input of `Workspace.fork`: give `target` a copy of `source`'s workspace."""

    source: str
    target: str
    quota_mb: int


class Copied(msgspec.Struct, frozen=True):
    files: int = 0


class ErasureRequest(msgspec.Struct, frozen=True):
    """Erase one agent (`address`, with the agents it spawned) or, without it, the whole
    tenant the `Lifecycle` object is keyed by. `by`: who asked, recorded."""

    address: str = ""
    by: str = ""


class ErasureTargets(msgspec.Struct, frozen=True):
    """What an erasure removes, found before anything is removed: names and digests only."""

    agents: tuple[str, ...] = ()
    effects: tuple[str, ...] = ()
    """The `Effects` keys (digests) of the agents' side-effecting calls."""
    artifacts: tuple[str, ...] = ()
    """sha256 digests of artifacts only these agents wrote."""
    hooks: tuple[str, ...] = ()
    events: int = 0
    counted: int = 0
    """How many of the agents started a turn, so count as one of the tenant's agents."""
    memories: tuple[str, ...] = ()
    """The keys of the `Memory` objects (scopes) the erasure clears."""
    written: int = 0
    """How many artifacts no other agent of the tenant wrote: the record's count, which
    says nothing of other tenants (`artifacts` leaves out what one of theirs wrote too)."""


class WorkspaceErase(msgspec.Struct, frozen=True):
    """The input of `Workspace.erase`."""

    agents: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()


class Erased(msgspec.Struct, frozen=True):
    """How much one step of an erasure removed."""

    workspaces: int = 0
    artifacts: int = 0
    invocations: int = 0
    keys: int = 0


class ErasureRecord(msgspec.Struct, frozen=True):
    """One erasure: who asked, when, what it removed, by name and count (never content)."""

    at: datetime
    by: str
    what: Literal["agent", "tenant", "memory"]
    """`memory`: memories forgotten through the API, `target` their scope's key."""
    target: str
    agents: tuple[str, ...] = ()
    events: int = 0
    workspaces: int = 0
    artifacts: int = 0
    invocations: int = 0
    """Restate invocations killed or purged (journals and retained results)."""
    state_keys: int = 0
    """Objects whose Restate state was cleared."""
    archived: int = 0
    """Archived copies of agents removed from the archive store."""
    memory_id: str = ""
    """The one memory record forgotten (`what: memory`); empty when it was every record
    of the scope."""


class MemoryErasure(msgspec.Struct, frozen=True):
    """Forget one record of a scope (`memory_id`) or, without it, every record of the
    scope, for `by` (recorded with the tenant's erasures)."""

    scope: MemoryScope
    memory_id: str = ""
    by: str = ""


class ErasureList(msgspec.Struct, frozen=True):
    records: tuple[ErasureRecord, ...] = ()


class Released(msgspec.Struct, frozen=True):
    """The input of `TenantUsage.give_agents`: agents erased, no longer counted."""

    count: int


class StateEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """One key of an object's Restate state, its value as Restate holds it: kept as the
    JSON it is (`json`, so an archive reads as text), or as bytes when it is not JSON."""

    key: str
    json: msgspec.Raw = msgspec.Raw(b"")
    data: bytes = b""

    @classmethod
    def of(cls, key: str, value: bytes) -> StateEntry:
        try:
            msgspec.json.decode(value)
        except msgspec.DecodeError:
            return cls(key, data=value)
        return cls(key, json=msgspec.Raw(value))

    @property
    def value(self) -> bytes:
        return bytes(self.json) if len(self.json) else self.data


class AgentArchive(msgspec.Struct, frozen=True):
    """An archived agent: every key of its `Agent` state, as it was when it left Restate."""

    address: str
    at: datetime
    entries: tuple[StateEntry, ...] = ()


class Archived(msgspec.Struct, frozen=True):
    """What archiving or bringing back an agent moved: its state's keys and their bytes
    (`keys` 0: there was nothing to move)."""

    address: str
    keys: int = 0
    bytes: int = 0


class ArchiveIdle(msgspec.Struct, frozen=True):
    """Asked of a tenant's `Lifecycle.archive_idle`: archive its agents idle for longer
    than `days` (0: the operator's `TEASPILL_ARCHIVE_IDLE_DAYS`)."""

    days: float = 0


class IdleArchived(msgspec.Struct, frozen=True):
    """What `archive_idle` did: the agents it archived, and those it left (a turn had
    started meanwhile, or the agent is paused)."""

    archived: tuple[str, ...] = ()
    left: tuple[str, ...] = ()


class Tombstone(msgspec.Struct, frozen=True):
    """A tenant whose erasure has begun (`done`: and ended): kept in its `Lifecycle` state
    for good, so nothing of the tenant (an agent, a spec, a key, a memory) is made again."""

    since: datetime
    by: str = ""
    done: bool = False

    def sentence(self, tenant: str) -> str:
        doing = "was erased" if self.done else "is being erased"
        return f"Tenant {tenant} {doing}: nothing can be made in it again, keys included."


class Standing(msgspec.Struct, frozen=True):
    """A tenant's `Lifecycle.standing`: its tombstone, or None while it may be used."""

    tombstone: Tombstone | None = None
