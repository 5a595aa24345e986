"""Memory records: what an agent keeps beyond one conversation, with whose it is.

A record's scope names who may see it: one agent (`agent`, owner = the agent's
address), one user of the tenant (`user`, owner = the user's id), or the whole tenant
(`tenant`, owner empty). Its kind says what it is: `episodic` (what happened, a
preference) or `semantic` (a fact, an entity). Every record belongs to one tenant; no
read ever crosses tenants.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

ScopeKind = Literal["agent", "user", "tenant"]
MemoryKind = Literal["episodic", "semantic"]
MAX_MEMORY_CHARS = 4_000
"""Characters one record holds at most."""


class MemoryScope(msgspec.Struct, frozen=True):
    tenant: str
    kind: ScopeKind
    owner: str = ""
    """The agent's address (`agent`), the user's id (`user`), empty (`tenant`)."""

    @property
    def key(self) -> str:
        """The key of the one object that writes this scope's records."""
        return f"{self.tenant}:{self.kind}:{self.owner}" if self.owner else f"{self.tenant}:tenant"


class MemoryRecord(msgspec.Struct, frozen=True):
    id: str
    scope: MemoryScope
    kind: MemoryKind
    text: str
    at: datetime


class MemoryHit(msgspec.Struct, frozen=True):
    """A record a search found. Hits come most relevant first; no score is given: BM25's
    is computed over the index every tenant shares, so its value would tell of other
    tenants' words."""

    record: MemoryRecord


class MemoryList(msgspec.Struct, frozen=True):
    """A scope's records, newest first (`GET /v1/memory` without `q`)."""

    memories: tuple[MemoryRecord, ...] = ()


Ranking = Literal["bm25", "hybrid"]
"""How a search ordered what it found: BM25 alone, or BM25's list fused with the list of
the rows whose vectors are nearest the query's (an embeddings server is set)."""


class MemoryHitList(msgspec.Struct, frozen=True, omit_defaults=True):
    """The records a search found, most relevant first (`GET /v1/memory?q=`)."""

    memories: tuple[MemoryHit, ...]
    ranking: Ranking = "bm25"
    note: str = ""
    """Why a search meant to be hybrid was ranked by BM25 alone (the embeddings server did
    not answer), a sentence; empty otherwise."""


class MemorySearch(msgspec.Struct, frozen=True):
    """A search: the words, and the scopes it may look in (all of one tenant)."""

    query: str
    scopes: tuple[MemoryScope, ...]
    limit: int = 5


class MemoryNote(msgspec.Struct, frozen=True):
    """What to remember in the scope whose object receives it."""

    scope: MemoryScope
    kind: MemoryKind
    text: str


class MemoryRef(msgspec.Struct, frozen=True):
    id: str


class MemoryForgotten(msgspec.Struct, frozen=True):
    """Records of one scope taken out (`ids`), or every record of it (`ids` empty,
    `everything`)."""

    scope: MemoryScope
    ids: tuple[str, ...] = ()
    everything: bool = False


class MemoryAnswer(msgspec.Struct, frozen=True):
    """A write's answer: the record made, its `text` left empty (the caller sent it, and
    Restate keeps an answer for its idempotency retention, after a forget too), or what
    was wrong (`problem`, a sentence)."""

    record: MemoryRecord | None = None
    problem: str = ""
    found: bool = True
    """For a forget: whether the scope held the record."""


class MemoryPage(msgspec.Struct, frozen=True):
    """Asked of a scope's object: its records whose ids follow `after`, `limit` at most."""

    after: str = ""
    limit: int = 500


class MemoryRecords(msgspec.Struct, frozen=True):
    """A page of a scope's records as its object holds them, in id order (what a rebuild
    of the projection copies); `more` when records follow the last one."""

    records: tuple[MemoryRecord, ...] = ()
    more: bool = False


class MemoryShown(msgspec.Struct, frozen=True):
    """The records found for a turn as it started (a journaled step's result)."""

    records: tuple[MemoryRecord, ...] = ()
