"""Agents: send a message, read one agent's row, list a tenant's agents."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query

from services.gateway import service
from services.gateway.auth import Owned, Principal, owned, require
from services.gateway.errors import ApiError, unknown_agent
from services.gateway.models import (
    PRINTABLE_ASCII,
    AgentOut,
    AgentPage,
    AgentStatusName,
    Kind,
    MessageAccepted,
    MessageIn,
)
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime
from services.projection.store import AgentRow

router = APIRouter(tags=["agents"])
Rt = Annotated[Runtime, Depends(runtime)]


@router.post(
    "/v1/agents/{address}/messages",
    status_code=202,
    responses=errors(400, 401, 403, 404, 410, 413, 422, 503),
)
async def send_message(
    message: MessageIn,
    agent: Annotated[Owned, Depends(owned("write"))],
    rt: Rt,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            pattern=PRINTABLE_ASCII,
            description="The same key sends the message once, however often it is retried.",
        ),
    ] = None,
) -> MessageAccepted:
    """Send a message, one-way: answers at once with where to follow what it does. An
    agent that does not exist yet is created from the newest spec of `kind`. With a
    publishable key, the address is one of the end user's conversations and `kind` (if
    given) its own."""
    return await service.send(rt, agent, conversation_message(agent, message), idempotency_key)


def conversation_message(agent: Owned, message: MessageIn) -> MessageIn:
    """The message, with the kind of the end user's conversation (publishable key): a page
    cannot run its conversation as another kind."""
    kind = agent.caller.kind_of(agent.address)
    if kind is None:
        return message
    if message.kind not in (None, kind):
        raise ApiError(
            403,
            f"the conversation at {agent.address} is with {kind}: a publishable key's message "
            "may name no other kind",
        )
    return message.model_copy(update={"kind": kind})


@router.get("/v1/agents/{address}", responses=errors(400, 401, 404, 422, 503))
async def get_agent(agent: Annotated[Owned, Depends(owned("read"))], rt: Rt) -> AgentOut:
    """The agent's catalog row: its spec, status, current turn and last seq."""
    row = await rt.projection.read(lambda store: store.agent(agent.address))
    if row is None:
        raise unknown_agent(agent.address)
    queued = await rt.projection.read(lambda store: store.queued([agent.address]))
    return agent_out(row, queued)


@router.get("/v1/agents", responses=errors(401, 422, 503))
async def list_agents(
    *,
    caller: Annotated[Principal, Depends(require("read"))],
    rt: Rt,
    kind: Annotated[Kind | None, Query(description="Only agents of this spec kind.")] = None,
    status: Annotated[AgentStatusName | None, Query(description="Only in this status.")] = None,
    after: Annotated[
        str, Query(max_length=200, description="The `next` cursor of the previous page.")
    ] = "",
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> AgentPage:
    """The key's tenant's agents, ordered by address, a page at a time."""
    rows = await rt.projection.read(
        lambda store: store.agents(
            caller.tenant, kind=kind, status=status, after=after, limit=limit + 1
        )
    )
    page = rows[:limit]
    more = len(rows) > limit
    queued = await rt.projection.read(lambda store: store.queued([r.address for r in page]))
    listed = [agent_out(r, queued) for r in page]
    return AgentPage(agents=listed, next=page[-1].address if more else None)


def agent_out(row: AgentRow, queued: dict[str, int]) -> AgentOut:
    return AgentOut(
        address=row.address,
        kind=row.kind,
        spec_version=row.spec_version,
        status=row.status,
        turn=row.turn,
        last_seq=row.last_seq,
        last_outcome=row.last_outcome,
        last_activity=row.last_activity,
        queued=queued.get(row.address, 0),
    )
