"""End users: how a tenant's tokens are verified (admin), a visitor token for a page
without one, and an end user's conversations (publishable key)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends

from schemas.tenant import EndUsers
from services.endusers import VISITOR_DAYS, problem, visitor_token
from services.gateway.auth import Principal, principal, require
from services.gateway.errors import ApiError
from services.gateway.models import ConversationsOut, EndUsersIn, EndUsersOut, VisitorOut
from services.gateway.openapi import errors
from services.gateway.routes_agents import agent_out
from services.gateway.runtime import Runtime, runtime
from services.keys import PUBLISHABLE
from services.projection.store import AgentRow
from services.projection.stores import ReadSide

router = APIRouter(tags=["end users"])
Rt = Annotated[Runtime, Depends(runtime)]
VISITOR_SECRET = "visitor tokens"  # noqa: S105 - a label, not a secret
"""What the gateway's signing key is derived for to sign visitor tokens (a hook's id has
no space, so no hook's secret is this one)."""


@router.put("/v1/end-users", responses=errors(400, 401, 403, 410, 413, 422, 503))
async def register(
    wanted: EndUsersIn, caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> EndUsersOut:
    """Register how the tenant's end-user tokens are verified, replacing what was; publishable
    keys check tokens with it within `TEASPILL_KEY_CACHE_SECONDS`."""
    given = EndUsers(wanted.algorithm, wanted.key, wanted.audience, wanted.issuer, wanted.anonymous)
    if (found := problem(given)) is not None:
        raise ApiError(400, found)
    return end_users_out(await rt.ingress.set_end_users(caller.tenant, given))


@router.get("/v1/end-users", responses=errors(401, 403, 503))
async def registered(
    caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> EndUsersOut:
    """How the tenant's end-user tokens are verified; never the key itself."""
    return end_users_out((await rt.ingress.keys(caller.tenant)).end_users)


@router.post("/v1/visitors", status_code=201, responses=errors(401, 403, 429, 503))
async def visitor(caller: Annotated[Principal, Depends(principal)], rt: Rt) -> VisitorOut:
    """A visitor token for a page without an end-user token (publishable key), when the
    tenant takes visitors: a new id each time, for the page to keep. At most
    `TEASPILL_VISITOR_RATE` a second per key (bursts of `TEASPILL_VISITOR_BURST`)."""
    if caller.scope != PUBLISHABLE:
        raise ApiError(403, "visitor tokens are for publishable keys: this key is " + caller.scope)
    if not caller.visitors:
        raise ApiError(
            403,
            f"tenant {caller.tenant} takes no visitors: its pages need an end-user token "
            "(PUT /v1/end-users with anonymous true lets visitors in)",
        )
    rt.visitor_tokens.take(caller.key_id)
    now = datetime.now(UTC)  # noqa: TID251 - not durable
    user, token = visitor_token(
        rt.hook_key.secret_for(VISITOR_SECRET), caller.tenant, caller.key_id, now
    )
    expires = (now + timedelta(days=VISITOR_DAYS)).isoformat()
    return VisitorOut(user=user, token=token, expires_at=expires)


@router.get("/v1/me/conversations", responses=errors(401, 403, 503))
async def conversations(
    caller: Annotated[Principal, Depends(principal)], rt: Rt
) -> ConversationsOut:
    """The end user's conversations that exist (publishable key with an end-user token),
    and no one else's."""
    if caller.scope != PUBLISHABLE:
        raise ApiError(
            403, "conversations are an end user's, listed with a publishable key and their token"
        )
    addresses = [address for _, address in caller.conversations]

    async def existing(store: ReadSide) -> list[AgentRow]:
        found = [await store.agent(address) for address in addresses]
        return [row for row in found if row is not None]

    rows = await rt.projection.read(existing)
    queued = await rt.projection.read(lambda store: store.queued([r.address for r in rows]))
    return ConversationsOut(user=caller.user, conversations=[agent_out(r, queued) for r in rows])


def visitors_past(key_id: str, limit: int, day: str) -> str:
    """Why a visitor's new conversation is refused: `key_id` let visitors create `limit`
    on `day`."""
    return (
        f"publishable key {key_id} let visitors create {limit} conversations on {day} (UTC), "
        "the most for a day (TEASPILL_VISITOR_CONVERSATIONS): visitors' new conversations "
        "are taken again tomorrow; end users with a token are not counted"
    )


def end_users_out(held: EndUsers) -> EndUsersOut:
    fingerprint = hashlib.sha256(held.key.encode()).hexdigest()[:16] if held.key else ""
    return EndUsersOut(
        algorithm=held.algorithm,
        key_sha256=fingerprint,
        audience=held.audience,
        issuer=held.issuer,
        anonymous=held.anonymous,
        registered_at=held.registered_at.isoformat() if held.registered_at else None,
    )
