"""Turn control: answer an approval request, stop a turn, pause and resume an agent.

All are one-way sends to Restate ingress, answered 202 as soon as Restate holds them,
whatever the state of the service endpoint. Their idempotency keys are made from the
request, so a client's retry is the same send. What the projection already shows to be
impossible is refused at once (404, 409); the agent decides the rest and records the
outcome on its timeline.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from schemas.wake import Pause, Resume
from services.gateway import service
from services.gateway.auth import Owned, owned
from services.gateway.models import ApprovalAccepted, ApprovalIn, HoldAccepted, StopAccepted
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime
from services.keys import signature

router = APIRouter(tags=["control"])
Rt = Annotated[Runtime, Depends(runtime)]
RequestId = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,120}$", description="From `approval_requested`.")
]


@router.post(
    "/v1/agents/{address}/approvals/{request_id}",
    status_code=202,
    responses=errors(400, 401, 403, 404, 409, 413, 422, 503),
)
async def answer_approval(
    request_id: RequestId,
    answer: ApprovalIn,
    agent: Annotated[Owned, Depends(owned("write"))],
    rt: Rt,
) -> ApprovalAccepted:
    """Approve or deny the call the agent waits on (202). The agent applies the answer in
    its next wake, even if the endpoint is restarting now: `approval_answered` says it was
    applied, `approval_refused` why not. A request the timeline does not show is 404; one
    it shows answered, or whose turn ended, is 409."""
    return await service.answer(rt, agent, request_id, answer)


@router.post(
    "/v1/agents/{address}/stop", status_code=202, responses=errors(400, 401, 403, 404, 503)
)
async def stop_turn(agent: Annotated[Owned, Depends(owned("write"))], rt: Rt) -> StopAccepted:
    """Stop the turn in progress (202): within seconds once the endpoint runs, even
    mid-generation. The turn ends `stopped`; if no turn was in progress when the stop
    arrived, `stop_refused` says so."""
    row = await service.known(rt, agent.address)
    after = row.last_seq if row is not None else 0
    invocation = await rt.ingress.stop(agent.address, f"stop after {after}")
    return StopAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=service.events_url(agent.address, after),
        message=f"The stop is accepted; {agent.address}'s timeline will show its outcome.",
    )


@router.post(
    "/v1/agents/{address}/pause", status_code=202, responses=errors(400, 401, 403, 404, 503)
)
async def pause_agent(agent: Annotated[Owned, Depends(owned("write"))], rt: Rt) -> HoldAccepted:
    """Pause the agent (202): a running turn finishes its round and holds there; then
    nothing runs until it is resumed. Messages, schedule fires and children's reports
    that arrive meanwhile are kept, in order. `agent_paused` says when it holds."""
    row = await service.known(rt, agent.address)
    after = row.last_seq if row is not None else 0
    by = signature(agent.caller.key_id, agent.caller.key_name)
    invocation = await rt.ingress.pause(agent.address, Pause(by), f"pause after {after}")
    return _held(agent.address, invocation, after, "pause")


@router.post(
    "/v1/agents/{address}/resume", status_code=202, responses=errors(400, 401, 403, 404, 503)
)
async def resume_agent(agent: Annotated[Owned, Depends(owned("write"))], rt: Rt) -> HoldAccepted:
    """Resume a paused agent (202): its held turn goes on, then what arrived while it was
    paused runs, in order. `agent_resumed` says when it applied."""
    row = await service.known(rt, agent.address)
    after = row.last_seq if row is not None else 0
    by = signature(agent.caller.key_id, agent.caller.key_name)
    invocation = await rt.ingress.resume(agent.address, Resume(by), f"resume after {after}")
    return _held(agent.address, invocation, after, "resume")


def _held(address: str, invocation: str, after: int, what: str) -> HoldAccepted:
    return HoldAccepted(
        address=address,
        invocation_id=invocation,
        after_seq=after,
        events_url=service.events_url(address, after),
        message=f"The {what} is accepted; {address}'s timeline will show when it applied.",
    )
