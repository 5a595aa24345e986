"""Published specs, API keys and the batches the projector receives."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from schemas.events import AgentState, Event
from schemas.spec import AgentSpec

Scope = Literal["read", "write", "admin"]


class EventBatch(msgspec.Struct, frozen=True):
    """Events one agent appended in one flush, in seq order."""

    events: tuple[Event, ...]
    status: AgentState
    """The agent's status once these events are recorded."""


class PublishedSpec(msgspec.Struct, frozen=True):
    tenant: str
    spec: AgentSpec
    """`spec.kind` and `spec.version` name it; versions count from 1 per kind."""
    published_at: datetime


class ApiKey(msgspec.Struct, frozen=True):
    """A key as stored: only the hash of its secret, never the secret."""

    id: str
    tenant: str
    scope: Scope
    hash: str
    created_at: datetime
    revoked_at: datetime | None = None


class SpecQuery(msgspec.Struct, frozen=True):
    kind: str


class SpecAnswer(msgspec.Struct, frozen=True):
    """The newest published version of a kind, or none."""

    spec: AgentSpec | None = None


class KeyRef(msgspec.Struct, frozen=True):
    id: str


class RebuildReport(msgspec.Struct, frozen=True):
    agents: int
    events: int
    specs: int
    keys: int


class SpecVersions(msgspec.Struct, frozen=True):
    """Every published version of one kind (or of all kinds), oldest first."""

    versions: tuple[PublishedSpec, ...] = ()


class Keys(msgspec.Struct, frozen=True):
    keys: tuple[ApiKey, ...] = ()
