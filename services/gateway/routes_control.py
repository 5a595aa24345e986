"""Turn control: answer an approval request, stop a turn.

Both are one-way sends to Restate ingress, answered 202 as soon as Restate holds them,
whatever the state of the service endpoint. Their idempotency keys are made from the
request, so a client's retry is the same send. What the projection already shows to be
impossible is refused at once (404, 409); the agent decides the rest and records the
outcome on its timeline.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from schemas.wake import Approval, answer_key
from services.gateway.auth import Owned, owned
from services.gateway.errors import ApiError
from services.gateway.models import ApprovalAccepted, ApprovalIn, StopAccepted
from services.gateway.openapi import errors
from services.gateway.routes_timeline import known
from services.gateway.runtime import Runtime, runtime
from services.keys import signature
from services.projection.store import ApprovalRow

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
    row = await known(rt, agent.address)
    story = await rt.projection.read(lambda store: store.approval(agent.address, request_id))
    _check_answerable(agent.address, request_id, story)
    wake = Approval(
        request_id,
        answer.approve,
        answer.note,
        by=signature(agent.caller.key_id, agent.caller.key_name),
    )
    invocation = await rt.ingress.answer(agent.address, wake, answer_key(wake))
    after = row.last_seq if row is not None else 0
    return ApprovalAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=f"/v1/agents/{agent.address}/events?after={after}",
        request_id=request_id,
        approve=answer.approve,
    )


@router.post(
    "/v1/agents/{address}/stop", status_code=202, responses=errors(400, 401, 403, 404, 503)
)
async def stop_turn(agent: Annotated[Owned, Depends(owned("write"))], rt: Rt) -> StopAccepted:
    """Stop the turn in progress (202): within seconds once the endpoint runs, even
    mid-generation. The turn ends `stopped`; if no turn was in progress when the stop
    arrived, `stop_refused` says so."""
    row = await known(rt, agent.address)
    after = row.last_seq if row is not None else 0
    invocation = await rt.ingress.stop(agent.address, f"stop after {after}")
    return StopAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=f"/v1/agents/{agent.address}/events?after={after}",
        message=f"The stop is accepted; {agent.address}'s timeline will show its outcome.",
    )


def _check_answerable(address: str, request_id: str, story: ApprovalRow | None) -> None:
    if story is None:
        raise ApiError(404, f"agent {address} has no approval request {request_id}")
    if story.answered:
        raise ApiError(409, f"approval request {request_id} was already answered")
    if story.turn_ended:
        raise ApiError(
            409, f"approval request {request_id} can no longer be answered: its turn ended"
        )
