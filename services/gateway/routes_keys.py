"""Keys: who the caller's key is (read), and the tenant's keys (admin)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path

from schemas.tenant import ApiKey
from services.gateway.auth import Principal, principal, require
from services.gateway.errors import ApiError
from services.gateway.models import ConversationOut, KeyCreated, KeyIn, KeyOut, KeysOut, MeOut
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime
from services.keys import new_key, publishable_problem

router = APIRouter(tags=["keys"])
Rt = Annotated[Runtime, Depends(runtime)]
KeyId = Annotated[str, Path(pattern=r"^[a-z0-9]{1,40}$", description="The key's id.")]


@router.get("/v1/me", responses=errors(401, 403, 503))
async def me(caller: Annotated[Principal, Depends(principal)]) -> MeOut:
    """The calling key: its tenant, scope and id (a UI shows only what the scope allows);
    for a publishable key, its end user and the address of each of their conversations."""
    return MeOut(
        tenant=caller.tenant,
        scope=caller.scope,
        key_id=caller.key_id,
        key_name=caller.key_name,
        user=caller.user,
        conversations=[ConversationOut(kind=k, address=a) for k, a in caller.conversations],
    )


@router.get("/v1/keys", responses=errors(401, 403, 503))
async def list_keys(caller: Annotated[Principal, Depends(require("admin"))], rt: Rt) -> KeysOut:
    """The tenant's keys, revoked ones included; never a secret."""
    keys = await rt.ingress.keys(caller.tenant)
    return KeysOut(keys=[key_out(key) for key in keys.keys])


@router.post("/v1/keys", status_code=201, responses=errors(400, 401, 403, 410, 413, 422, 503))
async def create_key(
    wanted: KeyIn, caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> KeyCreated:
    """Make a key for the caller's tenant. Its plaintext is in this answer only; it works
    once the projection has it (within a second or so). A publishable key needs `origins`
    and `kinds`; the other scopes take neither."""
    origins, kinds = tuple(wanted.origins), tuple(wanted.kinds)
    if (problem := publishable_problem(wanted.scope, origins, kinds)) is not None:
        raise ApiError(400, problem)
    now = datetime.now(UTC)  # noqa: TID251 - not durable
    plaintext, key = new_key(
        caller.tenant, wanted.scope, now, wanted.name, origins=origins, kinds=kinds
    )
    added = await rt.ingress.add_key(key)
    return KeyCreated(key=plaintext, info=key_out(added))


@router.post("/v1/keys/{key_id}/revoke", responses=errors(401, 403, 404, 422, 503))
async def revoke_key(
    key_id: KeyId, caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> KeyOut:
    """Revoke a key of the caller's tenant for good."""
    return key_out(await rt.ingress.revoke_key(caller.tenant, key_id))


def key_out(key: ApiKey) -> KeyOut:
    revoked = key.revoked_at.isoformat() if key.revoked_at else None
    return KeyOut(
        id=key.id,
        tenant=key.tenant,
        scope=key.scope,
        created_at=key.created_at.isoformat(),
        revoked_at=revoked,
        name=key.name,
        origins=list(key.origins),
        kinds=list(key.kinds),
    )
