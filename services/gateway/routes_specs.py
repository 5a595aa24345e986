"""Specs: publish a new version of a kind (admin), list what is published (read).

A published spec is decoded straight into `schemas.spec.AgentSpec`, so the API accepts
exactly what agents run, and grows with it, and checked by the code that checks every
spec (`services.specs`): unknown fields, a version, limits out of bounds, and (by the
Tenant object) models and tools the deployment does not have are refused with a sentence.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Query, Request, Response

from schemas.spec import AgentSpec
from schemas.tenant import SpecVersions
from services.gateway.auth import Principal, require
from services.gateway.errors import ApiError
from services.gateway.models import Kind
from services.gateway.openapi import errors, json_of
from services.gateway.runtime import Runtime, runtime
from services.specs import SpecError, parse_spec

router = APIRouter(tags=["specs"])
Rt = Annotated[Runtime, Depends(runtime)]


@router.post(
    "/v1/specs",
    status_code=201,
    response_class=Response,
    openapi_extra={"requestBody": json_of("AgentSpec", "The spec; leave `version` out.")},
    responses={
        201: json_of("PublishedSpec", "The spec as published, with its version."),
        **errors(400, 401, 403, 409, 410, 413, 422, 503),
    },
)
async def publish(
    request: Request, caller: Annotated[Principal, Depends(require("admin"))], rt: Rt
) -> Response:
    """Publish a spec: a new version of its kind. Turns that start from now on use it."""
    spec = decode_spec(await request.body())
    published = await rt.ingress.publish(caller.tenant, spec)
    return Response(msgspec.json.encode(published), 201, media_type="application/json")


@router.get(
    "/v1/specs",
    response_class=Response,
    responses={
        200: json_of("SpecVersions", "Published versions, by kind, oldest first."),
        **errors(401, 422, 503),
    },
)
async def list_specs(
    caller: Annotated[Principal, Depends(require("read"))],
    rt: Rt,
    kind: Annotated[Kind | None, Query(description="Only versions of this kind.")] = None,
) -> Response:
    """The tenant's published specs, every version."""
    specs = await rt.projection.read(lambda store: store.specs(caller.tenant, kind))
    return Response(msgspec.json.encode(SpecVersions(tuple(specs))), media_type="application/json")


def decode_spec(body: bytes) -> AgentSpec:
    """The checks every spec gets (services.specs); the Tenant object checks the model and
    tool names against what the deployment offers when it publishes."""
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}") from error
    try:
        return parse_spec(raw, "The spec in the request body")
    except SpecError as error:
        raise ApiError(422, str(error)) from error
