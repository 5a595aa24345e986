"""An agent's schedules: make one, list them with their next fire, remove one.

The `Schedules` object (keyed by the agent's address) holds them and checks what the
operator allows; a fire is a delayed one-way send it made to itself.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Header, Path, Response

from schemas.schedule import At, Cron, Every, ScheduleSpec, When
from services.gateway import service
from services.gateway.auth import Owned, owned
from services.gateway.errors import ApiError, needs_kind
from services.gateway.models import PRINTABLE_ASCII, ScheduleIn
from services.gateway.openapi import errors, json_of
from services.gateway.runtime import Runtime, runtime
from services.schedules.timing import ScheduleError, duration

router = APIRouter(tags=["schedules"])
Rt = Annotated[Runtime, Depends(runtime)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=PRINTABLE_ASCII,
        description="The same key makes the schedule once, however often it is retried.",
    ),
]
ScheduleId = Annotated[str, Path(pattern=r"^s[0-9]{1,12}$", description="From the listing.")]


@router.post(
    "/v1/agents/{address}/schedules",
    status_code=201,
    response_class=Response,
    responses={
        201: json_of("Schedule", "The schedule, with its id and first fire (`next_at`)."),
        **errors(400, 401, 403, 404, 413, 422, 429, 503),
    },
)
async def add_schedule(
    body: ScheduleIn,
    agent: Annotated[Owned, Depends(owned("write"))],
    rt: Rt,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Send the agent `text` on a clock: `every` a duration, at each match of `cron` in
    `zone`, or once `at` an instant. Each fire is a message like one sent by hand."""
    row = await rt.projection.read(lambda store: store.agent(agent.address))
    if row is None and body.kind is None and agent.address not in rt.recent:
        raise needs_kind(agent.address)
    if body.kind is not None:
        await service.require_published(rt, agent.caller.tenant, body.kind)
    if row is None and agent.address not in rt.recent:
        await rt.quotas.new_agent(agent.caller.tenant)
    spec = ScheduleSpec(body.text, _when(body), body.while_busy, body.kind)
    made = await rt.ingress.add_schedule(agent.address, spec, idempotency_key)
    return Response(msgspec.json.encode(made), 201, media_type="application/json")


@router.get(
    "/v1/agents/{address}/schedules",
    response_class=Response,
    responses={
        200: json_of("ScheduleList", "The agent's schedules, oldest first."),
        **errors(400, 401, 404, 503),
    },
)
async def list_schedules(agent: Annotated[Owned, Depends(owned("read"))], rt: Rt) -> Response:
    """The agent's schedules with their next fire (`next_at`) and what they did so far."""
    listed = await rt.ingress.schedules(agent.address)
    return Response(msgspec.json.encode(listed), media_type="application/json")


@router.delete(
    "/v1/agents/{address}/schedules/{schedule_id}",
    response_class=Response,
    responses={
        200: json_of("Schedule", "The schedule removed."),
        **errors(400, 401, 403, 404, 503),
    },
)
async def remove_schedule(
    schedule_id: ScheduleId, agent: Annotated[Owned, Depends(owned("write"))], rt: Rt
) -> Response:
    """Remove a schedule: it never fires again (a fire already sent still runs)."""
    removed = await rt.ingress.remove_schedule(agent.address, schedule_id)
    return Response(msgspec.json.encode(removed), media_type="application/json")


def _when(body: ScheduleIn) -> When:
    if body.every is not None:
        try:
            return Every(duration(body.every))
        except ScheduleError as error:
            raise ApiError(422, str(error)) from error
    if body.cron is not None:
        return Cron(body.cron, body.zone)
    assert body.at is not None  # one_clock: exactly one of the three
    return At(body.at)
