"""Memory records through the API: remember, search or list, forget one, forget a scope.

Every route works within the key's own tenant: the scope a request names (the tenant,
one user of it, or one of its agents) is always the key's tenant's, so a key of another
tenant finds, lists and deletes nothing of it, and is answered as if nothing were there.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel, Field

from schemas.memory import (
    MAX_MEMORY_CHARS,
    MemoryHitList,
    MemoryKind,
    MemoryList,
    MemoryNote,
    MemoryScope,
    MemorySearch,
)
from services.gateway.auth import Principal, own, require
from services.gateway.errors import ApiError
from services.gateway.openapi import errors, json_of
from services.gateway.runtime import Runtime, runtime
from services.keys import signature
from services.projection.embeddings import configured, query_vector, ranking_of

router = APIRouter(tags=["memory"])
Rt = Annotated[Runtime, Depends(runtime)]
ScopeName = Literal["tenant", "user", "agent"]
USER_ID = r"^[^\x00-\x1f\x7f]{1,200}$"
"""A user's id as an end-user token names it (`services.endusers`): 1 to 200 characters,
none a control character (a visitor's `visitor:...` too)."""
MemoryId = Annotated[str, Path(pattern=r"^mem[0-9a-f]{20}$", description="From its record.")]


class MemoryIn(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)
    kind: MemoryKind = "episodic"
    scope: ScopeName = "tenant"
    user: str | None = Field(default=None, pattern=USER_ID)
    """The user's id, for `scope: user`."""
    agent: str | None = None
    """The agent's address, for `scope: agent`."""


def scope_of(
    caller: Principal, scope: ScopeName, user: str | None, agent: str | None
) -> MemoryScope:
    """The scope named, always within the caller's tenant."""
    if scope == "user":
        if not user:
            raise ApiError(400, "scope user needs `user`, the user's id.")
        return MemoryScope(caller.tenant, "user", user)
    if scope == "agent":
        if not agent:
            raise ApiError(400, "scope agent needs `agent`, the agent's address.")
        return MemoryScope(
            caller.tenant, "agent", own(caller, agent, "read", field="agent").address
        )
    return MemoryScope(caller.tenant, "tenant")


def _json(value: object, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status, media_type="application/json")


@router.post(
    "/v1/memory",
    status_code=201,
    response_class=Response,
    responses={
        201: json_of("MemoryRecord", "The record kept."),
        **errors(400, 401, 403, 404, 410, 422),
    },
)
async def remember(
    body: MemoryIn, caller: Annotated[Principal, Depends(require("write"))], rt: Rt
) -> Response:
    """Keep `text` in a scope of the key's tenant: the whole tenant, one `user` of it, or
    one `agent`. Searchable once this answers."""
    scope = scope_of(caller, body.scope, body.user, body.agent)
    await rt.keys.refuse_if_erased(caller.tenant)
    answer = await rt.ingress.remember(MemoryNote(scope, body.kind, body.text))
    if answer.record is None:
        raise ApiError(422, answer.problem)
    return _json(msgspec.structs.replace(answer.record, text=body.text), 201)


@router.get(
    "/v1/memory",
    response_class=Response,
    responses={
        200: json_of(
            ("MemoryHitList", "MemoryList"),
            "With `q`, the records found, most relevant first; without, the scope's records.",
        ),
        **errors(400, 401, 404, 503),
    },
)
async def search(
    caller: Annotated[Principal, Depends(require("read"))],
    rt: Rt,
    *,
    scope: ScopeName = "tenant",
    user: Annotated[str | None, Query(pattern=USER_ID)] = None,
    agent: str | None = None,
    q: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> Response:
    """With `q`, the scope's records that match its words, most relevant first (BM25, or
    hybrid with an embeddings server: BM25's list fused with the records nearest `q`'s
    vector, both within the scope); without, the scope's newest records."""
    within = scope_of(caller, scope, user, agent)
    if q:
        query = await query_vector(q, configured(rt.settings))
        hits = await rt.projection.read(
            lambda store: store.search_memories(MemorySearch(q, (within,), limit), query)
        )
        return _json(MemoryHitList(tuple(hits), ranking_of(query), query.note))
    records = await rt.projection.read(lambda store: store.memories(within, limit))
    return _json(MemoryList(tuple(records)))


@router.delete(
    "/v1/memory/{memory_id}",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Forgotten."}, **errors(400, 401, 403, 404)},
)
async def forget(
    memory_id: MemoryId,
    caller: Annotated[Principal, Depends(require("write"))],
    rt: Rt,
    *,
    scope: ScopeName = "tenant",
    user: Annotated[str | None, Query(pattern=USER_ID)] = None,
    agent: str | None = None,
) -> Response:
    """Forget one record of the scope: from its state and from the search. The tenant's
    erasures record it (who, when, the scope and the record's id; never its text)."""
    within = scope_of(caller, scope, user, agent)
    by = signature(caller.key_id, caller.key_name)
    answer = await rt.ingress.forget_memory(within, memory_id, by)
    if not answer.found:
        raise ApiError(404, f"There is no memory {memory_id} in this scope.")
    return Response(status_code=204)


@router.delete(
    "/v1/memory",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Forgotten."}, **errors(400, 401, 403, 404)},
)
async def forget_scope(
    caller: Annotated[Principal, Depends(require("write"))],
    rt: Rt,
    scope: ScopeName = "user",
    user: Annotated[str | None, Query(pattern=USER_ID)] = None,
    agent: str | None = None,
) -> Response:
    """Forget every record of the scope (a user's memories, say), recorded with the
    tenant's erasures (who, when, the scope; never the text)."""
    within = scope_of(caller, scope, user, agent)
    await rt.ingress.forget_memories(within, signature(caller.key_id, caller.key_name))
    return Response(status_code=204)
