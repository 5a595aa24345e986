"""Operations: health, metrics, the live-delta inlet of the execution plane, and the
projector's notices of new events."""

from __future__ import annotations

import hmac
from typing import Annotated, TypeVar

import msgspec
from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.responses import JSONResponse

from schemas.address import InvalidAddressError, parse_address
from schemas.live import LiveBatch, LiveDelta
from schemas.projection import ProjectedBatch
from services.gateway import metrics
from services.gateway.errors import ApiError, error_body
from services.gateway.models import Health, HealthDown, LiveAccepted, ProjectedAccepted
from services.gateway.openapi import errors, json_of
from services.gateway.reader import ProjectionUnavailableError
from services.gateway.runtime import Runtime, runtime

router = APIRouter(tags=["operations"])
T = TypeVar("T")
Rt = Annotated[Runtime, Depends(runtime)]


@router.get(
    "/v1/health",
    response_model=Health,
    responses={503: {"model": HealthDown, "description": "A part is down: `parts` says why."}},
)
async def health(rt: Rt) -> JSONResponse:
    """200 when the projection can be read and Restate ingress answers; else 503."""
    parts = {"projection": await projection_state(rt), "ingress": await rt.ingress.healthy()}
    down = [f"{name} {state}" for name, state in parts.items() if state != "ok"]
    if not down:
        return JSONResponse({"status": "ok"})
    body = {"status": "unavailable", "parts": parts, **error_body(503, "; ".join(down))}
    return JSONResponse(body, 503)


async def projection_state(rt: Runtime) -> str:
    try:
        await rt.projection.read(lambda store: store.agent(""))
    except ProjectionUnavailableError as error:
        return error.message
    return "ok"


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format.",
            "content": {metrics.CONTENT_TYPE: {"schema": {"type": "string"}}},
        },
        **errors(401, 403, 503),
    },
)
async def prometheus(
    rt: Rt,
    authorization: Annotated[
        str | None,
        Header(description="`Bearer <TEASPILL_METRICS_TOKEN>`: metrics are for operators."),
    ] = None,
) -> Response:
    """Turns, rounds, model tokens, prompt-cache reuse, errors and agents by status, over
    every tenant: no label names a tenant, an agent or a key."""
    expected = rt.settings.metrics_token
    if not expected:
        raise ApiError(403, "metrics are switched off: TEASPILL_METRICS_TOKEN is not set")
    scheme, _, given = (authorization or "").strip().partition(" ")
    token = given.strip() if scheme.lower() == "bearer" else None
    check_token(expected, token, "Authorization: Bearer <metrics token>")
    return Response(await metrics.render(rt.projection), media_type=metrics.CONTENT_TYPE)


@router.post(
    "/internal/live",
    openapi_extra={"requestBody": json_of("LiveBatch", "Deltas, in the order written.")},
    responses=errors(400, 401, 403, 413, 422),
)
async def live(
    request: Request,
    rt: Rt,
    token: Annotated[
        str | None,
        Header(alias="X-Teaspill-Live-Token", description="TEASPILL_LIVE_TOKEN."),
    ] = None,
) -> LiveAccepted:
    """Live token deltas from the execution plane (not for clients): passed on to the
    agent's followers as `delta` events."""
    check_live_token(rt.settings.live_token, token)
    batch = decode_batch(await request.body())
    fresh, held = rt.hub.live(batch.deltas)
    return LiveAccepted(deltas=len(batch.deltas), fresh=fresh, held=held)


@router.post(
    "/internal/projected",
    openapi_extra={"requestBody": json_of("ProjectedBatch", "Agents and their newest seq.")},
    responses=errors(400, 401, 403, 413, 422),
)
async def projected(
    request: Request,
    rt: Rt,
    token: Annotated[
        str | None,
        Header(
            alias="X-Teaspill-Notify-Token",
            description="TEASPILL_NOTIFY_TOKEN, or TEASPILL_LIVE_TOKEN when that is empty.",
        ),
    ] = None,
) -> ProjectedAccepted:
    """The projector's notice that agents' timelines grew (not for clients): their
    followers read the new events from the projection now instead of at the next poll."""
    if not rt.settings.notify_secret:
        raise ApiError(
            403, "notices are switched off: TEASPILL_NOTIFY_TOKEN and TEASPILL_LIVE_TOKEN are empty"
        )
    check_token(rt.settings.notify_secret, token, "X-Teaspill-Notify-Token")
    batch = decode(await request.body(), ProjectedBatch)
    for item in batch.agents:
        check_agent(item.agent, "a notice's agent")
        if item.last_seq < 0:
            raise ApiError(422, "a notice's last_seq must be 0 or more")
    return ProjectedAccepted(agents=len(batch.agents), followed=rt.hub.projected(batch.agents))


def check_live_token(expected: str, given: str | None) -> None:
    if not expected:
        raise ApiError(403, "live deltas are switched off: TEASPILL_LIVE_TOKEN is not set")
    check_token(expected, given, "X-Teaspill-Live-Token")


def check_token(expected: str, given: str | None, header: str) -> None:
    if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
        raise ApiError(401, f"missing or wrong {header} header")


def decode(body: bytes, kind: type[T]) -> T:
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as error:
        raise ApiError(422, f"the body is not a {kind.__name__}: {error}") from error
    except msgspec.DecodeError as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}") from error


MAX_NUMBER = 2**62


def decode_batch(body: bytes) -> LiveBatch:
    batch = decode(body, LiveBatch)
    for delta in batch.deltas:
        check_delta(delta)
    return batch


def check_agent(agent: str, what: str) -> None:
    try:
        parse_address(agent)
    except InvalidAddressError as error:
        raise ApiError(422, f"{what} is not an address: {error}") from error


def check_delta(delta: LiveDelta) -> None:
    check_agent(delta.agent, "a delta's agent")
    numbers = (delta.turn, delta.round, delta.offset)
    if min(numbers) < 0 or max(numbers) > MAX_NUMBER:
        raise ApiError(422, "a delta's turn, round and offset must be whole numbers from 0 to 2^62")
