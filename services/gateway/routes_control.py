"""Turn control: answer an approval request, stop a turn."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from schemas.wake import Approval
from services.gateway.auth import Owned, owned
from services.gateway.errors import ApiError
from services.gateway.models import ApprovalAccepted, ApprovalIn, StopOut
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime

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
    """Approve or deny the call the agent waits on; the turn goes on where it paused.
    A request that was answered already is 409; one that does not exist is 404."""
    known = await rt.ingress.approvals(agent.address)
    if known.pending != request_id:
        if request_id in known.answered:
            raise ApiError(409, f"approval request {request_id} was already answered")
        raise ApiError(404, f"agent {agent.address} has no pending approval {request_id}")
    wake = Approval(request_id, answer.approve, answer.note, by=agent.caller.key_id)
    invocation = await rt.ingress.answer(agent.address, wake)
    return ApprovalAccepted(
        address=agent.address,
        request_id=request_id,
        approve=answer.approve,
        invocation_id=invocation,
    )


@router.post("/v1/agents/{address}/stop", responses=errors(400, 401, 403, 404, 503))
async def stop_turn(
    agent: Annotated[Owned, Depends(owned("write"))], rt: Rt, response: Response
) -> StopOut:
    """Stop the turn in progress within seconds, even mid-generation (202). An idle agent
    has nothing to stop (200, `stopping: false`)."""
    answer = await rt.ingress.stop(agent.address)
    response.status_code = 202 if answer.stopping else 200
    return StopOut(stopping=answer.stopping, message=answer.message)
