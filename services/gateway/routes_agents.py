"""Agents: send a message, read one agent's row, list a tenant's agents."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query

from services.gateway.auth import Owned, Principal, owned, require
from services.gateway.errors import ApiError, needs_kind, unknown_agent
from services.gateway.models import (
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
    responses=errors(400, 401, 403, 404, 413, 422, 503),
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
            description="The same key sends the message once, however often it is retried.",
        ),
    ] = None,
) -> MessageAccepted:
    """Send a message, one-way: answers at once with where to follow what it does. An
    agent that does not exist yet is created from the newest spec of `kind`."""
    row = await rt.projection.read(lambda store: store.agent(agent.address))
    if row is None and message.kind is None and agent.address not in rt.recent:
        raise needs_kind(agent.address)
    if message.kind is not None:
        await require_published(rt, agent.caller.tenant, message.kind)
    invocation = await rt.ingress.send_message(
        agent.address, message.text, message.kind, idempotency_key
    )
    if row is None:
        rt.recent.add(agent.address)
    after = row.last_seq if row is not None else 0
    return MessageAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=f"/v1/agents/{agent.address}/events?after={after}",
    )


async def require_published(rt: Runtime, tenant: str, kind: str) -> None:
    """The projection may lag a publish by a moment: ask the tenant object before saying no."""
    spec = await rt.projection.read(lambda store: store.latest_spec(tenant, kind))
    if spec is None:
        spec = await rt.ingress.latest_spec(tenant, kind)
    if spec is None:
        raise ApiError(
            404,
            f"no spec of kind {kind!r} is published for tenant {tenant}: publish one with "
            "POST /v1/specs (GET /v1/deployment lists the published kinds)",
        )


@router.get("/v1/agents/{address}", responses=errors(400, 401, 404, 422, 503))
async def get_agent(agent: Annotated[Owned, Depends(owned("read"))], rt: Rt) -> AgentOut:
    """The agent's catalog row: its spec, status, current turn and last seq."""
    row = await rt.projection.read(lambda store: store.agent(agent.address))
    if row is None:
        raise unknown_agent(agent.address)
    return agent_out(row)


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
    return AgentPage(agents=[agent_out(r) for r in page], next=page[-1].address if more else None)


def agent_out(row: AgentRow) -> AgentOut:
    return AgentOut(
        address=row.address,
        kind=row.kind,
        spec_version=row.spec_version,
        status=row.status,
        turn=row.turn,
        last_seq=row.last_seq,
        last_outcome=row.last_outcome,
        last_activity=row.last_activity,
    )
