"""Every Restate handler that code calls by name, declared once with its types.

Callers use these declarations (inside a handler through `services.durable.call` and
`send`, from outside through `services.ingress`), and the services register their
handlers under the same names, so a rename or a change of type breaks the type checker
instead of production. This module imports no Restate SDK: the gateway and the CLI use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote

import msgspec

from schemas.effects import Begin, Claim, Finished
from schemas.events import (
    AgentStatus,
    Approvals,
    StopAnswer,
    TimelinePage,
    TimelineQuery,
    WakeResult,
)
from schemas.hook import Delivery, HookAnswer, HookEntry, HookRef, HookSpec, TenantHookList
from schemas.knowledge import (
    DocumentAnswer,
    DocumentGone,
    DocumentList,
    DocumentRef,
    DocumentUpload,
    IndexedDocument,
)
from schemas.lifecycle import (
    Archived,
    ArchiveIdle,
    Copied,
    Erased,
    ErasureList,
    ErasureRecord,
    ErasureRequest,
    ErasureTargets,
    ForkQuery,
    ForkRequest,
    ForkSource,
    IdleArchived,
    MemoryErasure,
    Released,
    Standing,
    Tombstone,
    WorkspaceErase,
    WorkspaceFork,
)
from schemas.memory import (
    MemoryAnswer,
    MemoryForgotten,
    MemoryNote,
    MemoryPage,
    MemoryRecord,
    MemoryRecords,
    MemoryRef,
    MemoryScope,
)
from schemas.model import ModelReply, ModelRequest
from schemas.projection import EventBatch, RebuildReport, VectorFill
from schemas.schedule import Schedule, ScheduleList, ScheduleRef, ScheduleSpec, Tick
from schemas.spec import AgentSpec
from schemas.tenant import (
    ApiKey,
    EndUsers,
    KeyRef,
    Keys,
    Offered,
    PublishedSpec,
    SpecAnswer,
    SpecQuery,
    SpecVersions,
    TokenLease,
    TokensGranted,
    TokensQuery,
    TokensSettled,
    TokensToday,
)
from schemas.wake import Arrival, Pause, Stop, WakeEnvelope
from schemas.workspace import WorkspaceCall, WorkspaceReply

In = TypeVar("In")
Out = TypeVar("Out")


class Empty(msgspec.Struct, frozen=True):
    """The input of a handler that takes none, and the output of one that returns none."""


@dataclass(frozen=True)
class Handler(Generic[In, Out]):
    service: str
    name: str
    input: type[In]
    output: type[Out]
    keyed: bool = True

    def path(self, key: str | None = None) -> str:
        """The ingress path: `/Service/key/handler` (the key percent-encoded, as Restate
        decodes it: a memory scope's key holds an end user's id, which may hold `/`), or
        `/Service/handler` when unkeyed."""
        if self.keyed:
            if not key:
                raise ValueError(f"{self.service}/{self.name} needs a key")
            return f"/{self.service}/{quote(key, safe='')}/{self.name}"
        return f"/{self.service}/{self.name}"

    def encode(self, value: In) -> bytes:
        return b"" if self.input is Empty else msgspec.json.encode(value)

    def decode(self, raw: bytes) -> Out:
        if self.output is Empty:
            return Empty()  # type: ignore[return-value]
        return msgspec.json.decode(raw, type=self.output)


@dataclass(frozen=True)
class Stored(Generic[Out]):
    """A value a virtual object keeps under `name` in its state, which code outside the
    service reads from restate-server's storage (without running a handler). The object
    writes it with the SDK's default serde: a msgspec Struct is its JSON."""

    service: str
    name: str
    type: type[Out]

    def decode(self, raw: bytes) -> Out:
        return msgspec.json.decode(raw, type=self.type)


AGENT, TENANT, PROJECTOR, MODEL = "Agent", "Tenant", "Projector", "Model"
WORKSPACE, EFFECTS = "Workspace", "Effects"
SCHEDULES, HOOKS, TENANT_HOOKS = "Schedules", "Hooks", "TenantHooks"
TENANT_SCHEDULES, TENANT_USAGE = "TenantSchedules", "TenantUsage"
LIFECYCLE = "Lifecycle"
MEMORY = "Memory"
KNOWLEDGE = "Knowledge"

WAKE = Handler(AGENT, "wake", WakeEnvelope, WakeResult)
STOP = Handler(AGENT, "stop", Stop, StopAnswer)
ARRIVED = Handler(AGENT, "arrived", Arrival, Empty)
"""Shared: a message sent to `wake`, told to a turn running now (interrupt, steer, queue)."""
PAUSE = Handler(AGENT, "pause", Pause, Empty)
"""Shared: holds a running turn at its next round boundary, then sends `wake` a `Pause`."""
STATUS = Handler(AGENT, "status", Empty, AgentStatus)
TIMELINE = Handler(AGENT, "timeline", TimelineQuery, TimelinePage)
APPROVALS = Handler(AGENT, "approvals", Empty, Approvals)
FORK = Handler(AGENT, "fork", ForkRequest, AgentStatus)
"""Keyed by the new agent: begin as the source's first `seq` events (refused, 409, when the
address holds an agent already)."""
FORK_SOURCE = Handler(AGENT, "fork_source", ForkQuery, ForkSource)
"""Shared, keyed by the source: what a fork at `seq` takes besides the events."""

ARCHIVE = Handler(AGENT, "archive", Empty, Archived)
"""Move the agent's state out of Restate to the archive store (refused, 409, unless idle)."""
UNARCHIVE = Handler(AGENT, "unarchive", Empty, Archived)
"""Bring an archived agent's state back (nothing to do for one that is not archived)."""

ADD_SCHEDULE = Handler(SCHEDULES, "add", ScheduleSpec, Schedule)
"""Keyed by the agent's address, like every `Schedules` handler."""
REMOVE_SCHEDULE = Handler(SCHEDULES, "remove", ScheduleRef, Schedule)
LIST_SCHEDULES = Handler(SCHEDULES, "list", Empty, ScheduleList)
FIRE = Handler(SCHEDULES, "fire", Tick, Empty)
TAKE_SCHEDULE = Handler(TENANT_SCHEDULES, "take", Empty, Empty)
"""Keyed by the tenant: one schedule more, refused (429) at the tenant's ceiling."""
GIVE_SCHEDULE = Handler(TENANT_SCHEDULES, "give_back", Empty, Empty)

CREATE_HOOK = Handler(HOOKS, "create", HookSpec, HookSpec)
"""Keyed by the hook's id, like every `Hooks` handler."""
DELETE_HOOK = Handler(HOOKS, "delete", Empty, HookSpec)
GET_HOOK = Handler(HOOKS, "get", Empty, HookAnswer)
DELIVER = Handler(HOOKS, "deliver", Delivery, Empty)
LIST_HOOKS = Handler(TENANT_HOOKS, "list", Empty, TenantHookList)
"""Keyed by the tenant, like every `TenantHooks` handler."""
INDEX_HOOK = Handler(TENANT_HOOKS, "add", HookEntry, Empty)
UNINDEX_HOOK = Handler(TENANT_HOOKS, "remove", HookRef, Empty)

PUBLISH = Handler(TENANT, "publish", AgentSpec, PublishedSpec)
LATEST_SPEC = Handler(TENANT, "spec", SpecQuery, SpecAnswer)
SPECS = Handler(TENANT, "specs", Empty, SpecVersions)
ADD_KEY = Handler(TENANT, "add_key", ApiKey, ApiKey)
REVOKE_KEY = Handler(TENANT, "revoke_key", KeyRef, ApiKey)
KEYS = Handler(TENANT, "keys", Empty, Keys)
SET_END_USERS = Handler(TENANT, "set_end_users", EndUsers, EndUsers)
OFFERED = Handler(TENANT, "offered", Empty, Offered)
TENANT_KEYS = Stored(TENANT, "keys", Keys)
"""The tenant's keys, revoked ones included: the record a key is confirmed with."""

LEASE_TOKENS = Handler(TENANT_USAGE, "lease", TokenLease, TokensGranted)
"""Keyed by the tenant, like every `TenantUsage` handler: tokens of the day for a wake's
rounds, asked when what the wake holds does not cover the next model step."""
SETTLE_TOKENS = Handler(TENANT_USAGE, "settle", TokensSettled, Empty)
"""Sent one-way at a wake's end: what it was lent and what it used."""
TOKENS = Handler(TENANT_USAGE, "tokens", TokensQuery, TokensToday)
"""Shared: what the tenant's agents used (or hold) of a day."""
TAKE_AGENT = Handler(TENANT_USAGE, "take_agent", Empty, Empty)
"""One agent more for a spawn, refused (429) at the tenant's ceiling."""
COUNT_AGENT = Handler(TENANT_USAGE, "count_agent", Empty, Empty)
GIVE_AGENTS = Handler(TENANT_USAGE, "give_agents", Released, Empty)
"""Sent one-way by an agent's erasure: those agents no longer count."""
"""Sent one-way by an agent a message (not a spawn) brought into being, at its first wake."""

PROJECT_EVENTS = Handler(PROJECTOR, "events", EventBatch, Empty)
PROJECT_SPEC = Handler(PROJECTOR, "spec", PublishedSpec, Empty)
PROJECT_KEY = Handler(PROJECTOR, "key", ApiKey, Empty)
PROJECT_MEMORY = Handler(PROJECTOR, "memory", MemoryRecord, Empty)
PROJECT_FORGOTTEN = Handler(PROJECTOR, "forgotten", MemoryForgotten, Empty)
REMEMBER = Handler(MEMORY, "remember", MemoryNote, MemoryAnswer)
"""Keyed by the scope (`MemoryScope.key`): its one writer."""
FORGET_MEMORY = Handler(MEMORY, "forget", MemoryRef, MemoryAnswer)
FORGET_MEMORIES = Handler(MEMORY, "forget_all", MemoryScope, MemoryAnswer)
MEMORY_RECORDS = Handler(MEMORY, "records", MemoryPage, MemoryRecords)
"""Shared: a page of the scope's records (what a rebuild copies)."""
UPLOAD_DOCUMENT = Handler(KNOWLEDGE, "upload", DocumentUpload, DocumentAnswer)
"""Keyed by the tenant, like every `Knowledge` handler: the one writer of its documents."""
RELEASE_DOCUMENT = Handler(KNOWLEDGE, "release", DocumentRef, DocumentAnswer)
DELETE_DOCUMENT = Handler(KNOWLEDGE, "delete", DocumentRef, DocumentAnswer)
DOCUMENTS = Handler(KNOWLEDGE, "documents", Empty, DocumentList)
"""Shared: the tenant's documents, drafts too, without their text."""
INDEXED_DOCUMENT = Handler(KNOWLEDGE, "indexed", DocumentRef, IndexedDocument)
"""Shared: a document as the projection keeps it (what a rebuild copies); 404 when none."""
PROJECT_DOCUMENT = Handler(PROJECTOR, "document", IndexedDocument, Empty)
PROJECT_DOCUMENT_GONE = Handler(PROJECTOR, "document_gone", DocumentGone, Empty)
REBUILD = Handler(PROJECTOR, "rebuild", Empty, RebuildReport)
FILL_VECTORS = Handler(PROJECTOR, "vectors", VectorFill, Empty)
"""Keyed `<tenant>:vectors`, apart from the tenant's own key: a fill that waits on the
embeddings server never holds up the tenant's specs, keys and documents."""
REBUILD_KEY = "all"
"""The one key `rebuild` runs under, so two rebuilds never overlap."""

GENERATE = Handler(MODEL, "generate", ModelRequest, ModelReply, keyed=False)
FORGET = Handler(MODEL, "forget", ErasureTargets, Empty, keyed=False)
"""Drops erased agents' prompt-cache entries, in the models of the process it reaches."""

WORKSPACE_CALL = Handler(WORKSPACE, "call", WorkspaceCall, WorkspaceReply, keyed=False)
WORKSPACE_FORKABLE = Handler(WORKSPACE, "forkable", WorkspaceFork, Empty, keyed=False)
"""Refuses (409) a fork whose target has a workspace already."""
WORKSPACE_FORK = Handler(WORKSPACE, "fork", WorkspaceFork, Copied, keyed=False)
WORKSPACE_ERASE = Handler(WORKSPACE, "erase", WorkspaceErase, Erased, keyed=False)

ERASE_AGENT = Handler(LIFECYCLE, "erase_agent", ErasureRequest, ErasureRecord)
"""Keyed by the tenant, like every `Lifecycle` handler: one agent and those it spawned."""
ERASE_TENANT = Handler(LIFECYCLE, "erase_tenant", ErasureRequest, ErasureRecord)
ERASURES = Handler(LIFECYCLE, "erasures", Empty, ErasureList)
STANDING = Handler(LIFECYCLE, "standing", Empty, Standing)
"""Shared, keyed by the tenant: its tombstone once its erasure began (asked before an
agent, a spec or a key of it is made)."""
TOMBSTONE = Stored(LIFECYCLE, "tombstone", Tombstone)
"""The same tombstone, as the gateway reads it from Restate's storage with a key."""
ERASE_MEMORIES = Handler(LIFECYCLE, "erase_memories", MemoryErasure, MemoryAnswer)
"""Keyed by the tenant: forget memories through the scope's `Memory` object, and record
that they were forgotten (who, when, which scope; never their text)."""
ARCHIVE_IDLE = Handler(LIFECYCLE, "archive_idle", ArchiveIdle, IdleArchived)
"""Keyed by the tenant: archive its agents idle past the days asked (or the setting)."""
BEGIN_EFFECT = Handler(EFFECTS, "begin", Begin, Claim)
"""Keyed by the digest of an idempotency key: the first begin is the one that may act."""
FINISH_EFFECT = Handler(EFFECTS, "finish", Finished, Empty)
EXPIRE_EFFECT = Handler(EFFECTS, "expire", Empty, Empty)
"""Sent by `finish` to its own key, delayed by the ledger's retention: prunes the entry."""
