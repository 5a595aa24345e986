"""What a tenant holds: its published specs and its API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from schemas.spec import AgentSpec

Scope = Literal["read", "write", "admin", "publishable"]
"""`read`, `write` and `admin` are tenant-wide; a `publishable` key is made for a page: it
reaches only the conversations of the end user it is presented with, from its origins,
for its kinds."""
Algorithm = Literal["HS256", "RS256", "ES256"]


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
    name: str = ""
    """What the key is for, in its maker's words ("ci", "alice"): approvals and the console
    show it."""
    origins: tuple[str, ...] = ()
    """A publishable key's origins (`https://app.example.com`): it is valid only in a
    request whose `Origin` is one of them. Empty for the other scopes."""
    kinds: tuple[str, ...] = ()
    """The published kinds a publishable key's end users may talk to. Empty for the other
    scopes."""


class SpecQuery(msgspec.Struct, frozen=True):
    kind: str


class SpecAnswer(msgspec.Struct, frozen=True):
    """The newest published version of a kind, or none."""

    spec: AgentSpec | None = None


class KeyRef(msgspec.Struct, frozen=True):
    id: str


class SpecVersions(msgspec.Struct, frozen=True):
    """Every published version of one kind (or of all kinds), oldest first."""

    versions: tuple[PublishedSpec, ...] = ()


class Offered(msgspec.Struct, frozen=True):
    """The model and tool names the deployment's published specs may use: the names the
    Tenant object checks a publish against."""

    models: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    problem: str = ""
    """Why some models are missing (a models file that cannot be used), or empty."""
    known: bool = True
    """False when the deployment was started without an offer: names are not checked."""


class EndUsers(msgspec.Struct, frozen=True):
    """How a tenant's pages name their end users to its publishable keys: the key that
    verifies the tokens the product's backend signs, and whether visitors without a token
    get a conversation of their own."""

    algorithm: Algorithm | None = None
    """None while the tenant has registered no key: tokens are refused."""
    key: str = ""
    """The HS256 secret, or the PEM public key for RS256 and ES256."""
    audience: str = ""
    """When set, a token's `aud` must name it."""
    issuer: str = ""
    """When set, a token's `iss` must be it."""
    anonymous: bool = False
    """Whether a visitor without a token may have a conversation of its own (under an id
    the gateway issues)."""
    registered_at: datetime | None = None


class Keys(msgspec.Struct, frozen=True):
    keys: tuple[ApiKey, ...] = ()
    end_users: EndUsers = msgspec.field(default_factory=EndUsers)
    """Kept with the keys: the gateway reads them together, from the one stored value."""


class TokenLease(msgspec.Struct, frozen=True):
    """A wake asks the tenant for model tokens of the UTC day before a round's model step
    (when what it holds does not cover the step's estimate)."""

    day: str
    """`YYYY-MM-DD`, from the wake's journaled clock."""
    want: int


class TokensGranted(msgspec.Struct, frozen=True):
    """What the tenant lent the wake (0 once its agents used the day's tokens)."""

    day: str
    tokens: int


class TokensSettled(msgspec.Struct, frozen=True):
    """A wake's end: what it was lent of a day and what its model steps used."""

    day: str
    granted: int
    spent: int


class TokensQuery(msgspec.Struct, frozen=True):
    day: str
    """`YYYY-MM-DD`, from the asking wake's journaled clock."""


class TokensToday(msgspec.Struct, frozen=True):
    """What a tenant's agents used on `day`, with what running wakes hold of it, as the
    tenant's `TenantUsage` object holds it."""

    day: str
    tokens: int = 0
