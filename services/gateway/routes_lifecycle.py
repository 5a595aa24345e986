"""An agent's lifecycle: fork it from any event of its timeline; archive an agent and bring
it back, delete an agent, or erase the whole tenant (admin keys)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import Field

from schemas.lifecycle import ErasureRecord, ErasureRequest, ForkRequest
from services.gateway import service
from services.gateway.auth import Owned, Principal, own, owned, require
from services.gateway.models import Strict
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime
from services.keys import signature

router = APIRouter(tags=["lifecycle"])
Rt = Annotated[Runtime, Depends(runtime)]


class ForkIn(Strict):
    seq: int = Field(ge=1, description="The last event of the source the fork holds.")
    address: str = Field(
        min_length=1, max_length=200, description="The fork's address, in the same tenant."
    )


class ForkOut(Strict):
    address: str
    source: str
    seq: int
    last_seq: int = Field(description="The fork's newest event: its `agent_forked`.")
    turn: int
    events_url: str


@router.post(
    "/v1/agents/{address}/fork",
    status_code=201,
    responses=errors(400, 401, 403, 404, 409, 422, 429, 503),
)
async def fork_agent(
    given: ForkIn, agent: Annotated[Owned, Depends(owned("write"))], rt: Rt
) -> ForkOut:
    """A new agent whose timeline is this one's first `seq` events, then `agent_forked`;
    its history holds the turns that had ended by `seq`, it runs with the same spec
    version and has its own copy of the workspace as it is now. It answers its next message
    on its own; this agent goes on unchanged. A write key may fork (the fork holds nothing
    the key could not read, and counts as one of the tenant's agents)."""
    await service.known(rt, agent.address)
    target = own(agent.caller, given.address, "write", doing="forking", field="address")
    by = signature(agent.caller.key_id, agent.caller.key_name)
    status = await rt.ingress.fork(target.address, ForkRequest(agent.address, given.seq, by))
    rt.recent.add(target.address)
    return ForkOut(
        address=target.address,
        source=agent.address,
        seq=given.seq,
        last_seq=status.last_seq,
        turn=status.turn,
        events_url=service.events_url(target.address, 0),
    )


class ArchivedOut(Strict):
    address: str
    keys: int = Field(description="How many keys of its Restate state were moved (0: none).")
    bytes: int = Field(description="Their size.")


@router.post("/v1/agents/{address}/archive", responses=errors(400, 401, 403, 404, 409, 503))
async def archive_agent(agent: Annotated[Owned, Depends(owned("admin"))], rt: Rt) -> ArchivedOut:
    """Move an idle agent's state and timeline out of Restate to the archive store; its
    catalog row shows it `archived`. Its next message, or a read of its timeline, brings
    it back with its whole history (the first answer is slower). Refused (409) while a
    turn is in progress, the agent is paused, or it is archived already."""
    await service.known(rt, agent.address)
    moved = await rt.ingress.archive(agent.address)
    return ArchivedOut(address=moved.address, keys=moved.keys, bytes=moved.bytes)


@router.post("/v1/agents/{address}/unarchive", responses=errors(400, 401, 403, 404, 503))
async def unarchive_agent(agent: Annotated[Owned, Depends(owned("admin"))], rt: Rt) -> ArchivedOut:
    """Bring an archived agent's state back into Restate now, rather than at its next
    message (`keys` 0: it was not archived)."""
    await service.known(rt, agent.address)
    moved = await rt.ingress.archive(agent.address, back=True)
    return ArchivedOut(address=moved.address, keys=moved.keys, bytes=moved.bytes)


class ErasureOut(Strict):
    at: str
    by: str
    what: str
    target: str
    agents: list[str]
    events: int
    workspaces: int
    artifacts: int
    invocations: int
    state_keys: int
    archived: int = Field(description="Archived copies of agents removed.")


def erasure_out(record: ErasureRecord) -> ErasureOut:
    return ErasureOut(
        at=record.at.isoformat(),
        by=record.by,
        what=record.what,
        target=record.target,
        agents=list(record.agents),
        events=record.events,
        workspaces=record.workspaces,
        artifacts=record.artifacts,
        invocations=record.invocations,
        state_keys=record.state_keys,
        archived=record.archived,
    )


@router.delete("/v1/agents/{address}", responses=errors(400, 401, 403, 404, 503))
async def delete_agent(agent: Annotated[Owned, Depends(owned("admin"))], rt: Rt) -> ErasureOut:
    """Delete the agent and the agents it spawned, for good: what they have in flight is
    killed, and their Restate state, timeline, history, projection rows, workspaces,
    artifacts only they wrote, effect records and finished invocations are removed. The
    answer is the erasure's record (names and counts, no content)."""
    await service.known(rt, agent.address)
    by = signature(agent.caller.key_id, agent.caller.key_name)
    request = ErasureRequest(agent.address, by)
    return erasure_out(await rt.ingress.erase(agent.caller.tenant, request))


@router.delete("/v1/tenant", responses=errors(401, 403, 503))
async def erase_tenant(
    caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> ErasureOut:
    """Erase the key's whole tenant: every agent as a delete does, then its specs, keys
    (this one too), webhooks, schedules and counts. From its start nothing can be made in
    the tenant again (410), and its keys stop working. The answer is the erasure's record."""
    by = signature(caller.key_id, caller.key_name)
    record = await rt.ingress.erase(caller.tenant, ErasureRequest("", by))
    rt.keys.forget()  # this gateway refuses the tenant's keys at once, not in a key cache time
    return erasure_out(record)
