"""The `Tenant` virtual object, keyed by tenant: publishes specs and keeps API keys.

Nothing is published or added once the tenant's erasure has begun (its tombstone, 410).

Its state is the source of truth; every change is also sent one-way to the projector,
which is what the gateway reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import restate

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
)
from services.contracts import (
    ADD_KEY,
    LATEST_SPEC,
    OFFERED,
    PROJECT_KEY,
    PROJECT_SPEC,
    PUBLISH,
    REVOKE_KEY,
    SET_END_USERS,
    SPECS,
    TENANT,
    TENANT_KEYS,
)
from services.contracts import KEYS as KEYS_HANDLER
from services.durable import send
from services.endusers import problem as end_users_problem
from services.keys import publishable_problem
from services.lifecycle.tombstone import refuse_if_erased
from services.settings import settings
from services.specs import Offer, SpecError, parse_spec

KEYS = TENANT_KEYS.name


def spec_key(kind: str) -> str:
    return f"spec.{kind}"


tenant = restate.VirtualObject(
    TENANT, description="Published agent specs and API keys of one tenant."
)
OFFER: list[Offer] = []
"""What this deployment offers, set by the composition root (`offer_specs`); until it is
set, publishes are checked for everything but model and tool names."""


def offer_specs(offer: Offer) -> restate.VirtualObject:
    OFFER[:] = [offer]
    return tenant


@dataclass(frozen=True)
class TenantLimits:
    """What one tenant may hold: keys not revoked, spec kinds, versions of one kind."""

    keys: int
    kinds: int
    versions: int


def limits() -> TenantLimits:
    config = settings()
    return TenantLimits(config.tenant_keys, config.tenant_kinds, config.spec_versions)


@tenant.handler(name=PUBLISH.name, input_serde=restate.serde.BytesSerde())
async def publish(ctx: restate.ObjectContext, raw: bytes) -> PublishedSpec:
    spec = _checked(raw, ctx.key())
    await refuse_if_erased(ctx, ctx.key())
    stored = await ctx.get(spec_key(spec.kind), type_hint=SpecVersions) or SpecVersions()
    await _check_room(ctx, spec.kind, stored, limits())
    versions = next_version(stored, ctx.key(), spec, await _now(ctx))
    ctx.set(spec_key(spec.kind), versions)
    published = versions.versions[-1]
    send(ctx, PROJECT_SPEC, published, key=ctx.key())
    return published


def next_version(stored: SpecVersions, tenant: str, spec: AgentSpec, at: datetime) -> SpecVersions:
    """A kind's versions with `spec` published after them: versions count from 1."""
    versioned = msgspec.structs.replace(spec, version=len(stored.versions) + 1)
    return SpecVersions((*stored.versions, PublishedSpec(tenant, versioned, at)))


def latest(stored: SpecVersions | None) -> SpecAnswer:
    return SpecAnswer(stored.versions[-1].spec if stored and stored.versions else None)


async def _check_room(
    ctx: restate.ObjectContext, kind: str, stored: SpecVersions, most: TenantLimits
) -> None:
    if len(stored.versions) >= most.versions:
        raise restate.TerminalError(
            f"Tenant {ctx.key()} has published {len(stored.versions)} versions of kind "
            f"{kind!r}, the most one kind may have (TEASPILL_SPEC_VERSIONS): publish it "
            "under another kind.",
            429,
        )
    if not stored.versions:
        kinds = sum(name.startswith("spec.") for name in await ctx.state_keys())
        if kinds >= most.kinds:
            raise restate.TerminalError(
                f"Tenant {ctx.key()} has published {kinds} spec kinds, the most one tenant "
                "may have (TEASPILL_TENANT_KINDS): publish a new version of one of them.",
                429,
            )


def _checked(raw: bytes, tenant: str) -> AgentSpec:
    """The same checks as the CLI's and the gateway's, with the names this deployment has
    and the operator's workspace policy for the tenant."""
    offer = OFFER[0] if OFFER else None
    try:
        return parse_spec(msgspec.json.decode(raw), "The published spec", offer, tenant)
    except msgspec.DecodeError as error:
        raise restate.TerminalError(
            f"The published spec is not valid JSON: {error}.", 400
        ) from error
    except SpecError as error:
        raise restate.TerminalError(str(error), 422) from error


@tenant.handler(name=LATEST_SPEC.name, kind="shared")
async def spec(ctx: restate.ObjectSharedContext, query: SpecQuery) -> SpecAnswer:
    return latest(await ctx.get(spec_key(query.kind), type_hint=SpecVersions))


@tenant.handler(name=ADD_KEY.name)
async def add_key(ctx: restate.ObjectContext, key: ApiKey) -> ApiKey:
    await refuse_if_erased(ctx, ctx.key())
    keys = await ctx.get(KEYS, type_hint=TENANT_KEYS.type) or Keys()
    ctx.set(KEYS, with_key(keys, ctx.key(), key))
    send(ctx, PROJECT_KEY, key, key=ctx.key())
    return key


def with_key(keys: Keys, tenant: str, key: ApiKey) -> Keys:
    if key.tenant != tenant:
        raise restate.TerminalError("a key belongs to the tenant it is added to", 400)
    if (problem := publishable_problem(key.scope, key.origins, key.kinds)) is not None:
        raise restate.TerminalError(problem, 400)
    if any(k.id == key.id for k in keys.keys):
        raise restate.TerminalError(f"a key with id {key.id!r} exists already", 409)
    active = sum(k.revoked_at is None for k in keys.keys)
    if active >= limits().keys:
        raise restate.TerminalError(
            f"tenant {tenant} holds {active} keys that are not revoked, the most one "
            "tenant may hold (TEASPILL_TENANT_KEYS): revoke one first",
            429,
        )
    return msgspec.structs.replace(keys, keys=(*keys.keys, key))


@tenant.handler(name=REVOKE_KEY.name)
async def revoke_key(ctx: restate.ObjectContext, ref: KeyRef) -> ApiKey:
    keys = await ctx.get(KEYS, type_hint=TENANT_KEYS.type) or Keys()
    found = [k for k in keys.keys if k.id == ref.id]
    if not found:
        raise restate.TerminalError(f"tenant {ctx.key()} has no key {ref.id!r}", 404)
    if found[0].revoked_at is None:
        keys = without_key(keys, ref, await _now(ctx))
        ctx.set(KEYS, keys)
    revoked = next(k for k in keys.keys if k.id == ref.id)
    send(ctx, PROJECT_KEY, revoked, key=ctx.key())
    return revoked


def without_key(keys: Keys, ref: KeyRef, at: datetime) -> Keys:
    """`keys` with the one `ref` names revoked at `at`, unless it already was."""
    return msgspec.structs.replace(
        keys,
        keys=tuple(
            msgspec.structs.replace(k, revoked_at=at)
            if k.id == ref.id and k.revoked_at is None
            else k
            for k in keys.keys
        ),
    )


@tenant.handler(name=SET_END_USERS.name)
async def set_end_users(ctx: restate.ObjectContext, wanted: EndUsers) -> EndUsers:
    """Register how the tenant's end-user tokens are verified (replacing what was), and
    whether visitors without one are taken."""
    if (problem := end_users_problem(wanted)) is not None:
        raise restate.TerminalError(problem, 400)
    await refuse_if_erased(ctx, ctx.key())
    keys = await ctx.get(KEYS, type_hint=TENANT_KEYS.type) or Keys()
    registered = msgspec.structs.replace(wanted, registered_at=await _now(ctx))
    ctx.set(KEYS, msgspec.structs.replace(keys, end_users=registered))
    return registered


@tenant.handler(kind="shared", name=KEYS_HANDLER.name)
async def list_keys(ctx: restate.ObjectSharedContext) -> Keys:
    return await ctx.get(KEYS, type_hint=TENANT_KEYS.type) or Keys()


@tenant.handler(kind="shared", name=OFFERED.name)
async def offered(ctx: restate.ObjectSharedContext) -> Offered:
    """What publishes of this deployment are checked against, for clients to check first."""
    if not OFFER:
        return Offered(known=False)
    offer = OFFER[0]
    return Offered(offer.models, offer.tools, offer.problem)


@tenant.handler(kind="shared", name=SPECS.name)
async def list_specs(ctx: restate.ObjectSharedContext) -> SpecVersions:
    versions: list[PublishedSpec] = []
    for name in sorted(await ctx.state_keys()):
        if name.startswith("spec."):
            stored = await ctx.get(name, type_hint=SpecVersions)
            versions.extend(stored.versions if stored else ())
    return SpecVersions(tuple(versions))


async def _now(ctx: restate.ObjectContext) -> datetime:
    return datetime.fromtimestamp(await ctx.time(), UTC)
