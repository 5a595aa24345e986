"""Specs: publish a new version of a kind (admin), list what is published (read).

A published spec is decoded straight into `schemas.spec.AgentSpec`, so the API accepts
exactly what agents run, and grows with it. On top, the gateway refuses what would be
silently wrong: unknown fields, a kind that is not a name, a version (publishing assigns
it), negative limits.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Depends, Query, Request, Response

from schemas.catalog import SpecVersions
from schemas.spec import AgentSpec, Limits
from services.gateway.auth import Principal, require
from services.gateway.errors import ApiError
from services.gateway.models import KIND_PATTERN, MAX_TEXT, Kind
from services.gateway.openapi import errors, json_of
from services.gateway.runtime import Runtime, runtime

router = APIRouter(tags=["specs"])
Rt = Annotated[Runtime, Depends(runtime)]


@router.post(
    "/v1/specs",
    status_code=201,
    response_class=Response,
    openapi_extra={"requestBody": json_of("AgentSpec", "The spec; leave `version` out.")},
    responses={
        201: json_of("PublishedSpec", "The spec as published, with its version."),
        **errors(400, 401, 403, 409, 413, 422, 503),
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
    specs = await rt.catalog.read(lambda store: store.specs(caller.tenant, kind))
    return Response(msgspec.json.encode(SpecVersions(tuple(specs))), media_type="application/json")


def decode_spec(body: bytes) -> AgentSpec:
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}") from error
    if not isinstance(raw, dict):
        raise ApiError(422, "the request body must be a JSON object: an agent spec")
    _no_unknown_fields(raw, AgentSpec, "")
    if isinstance(raw.get("limits"), dict):
        _no_unknown_fields(raw["limits"], Limits, "limits.")
    try:
        spec = msgspec.convert(raw, AgentSpec)
    except msgspec.ValidationError as error:
        raise ApiError(422, f"the spec is invalid: {error}") from error
    _check(spec)
    return spec


def _no_unknown_fields(raw: dict[str, Any], type_: type[msgspec.Struct], prefix: str) -> None:
    known = {field.name for field in msgspec.structs.fields(type_)}
    unknown = sorted(set(raw) - known)
    if unknown:
        what = "limits are" if prefix else "a spec has"
        fields = ", ".join(sorted(known))
        raise ApiError(422, f"unknown field '{prefix}{unknown[0]}': {what} {fields}")


def _check(spec: AgentSpec) -> None:
    if not re.fullmatch(KIND_PATTERN, spec.kind):
        raise ApiError(422, f"field 'kind': {spec.kind!r} must be 1 to 48 of A-Z a-z 0-9 - _")
    if spec.version:
        raise ApiError(422, "field 'version': publishing assigns the version; leave it out")
    if len(spec.instructions) > MAX_TEXT:
        raise ApiError(422, f"field 'instructions': at most {MAX_TEXT} characters")
    for name, value in msgspec.structs.asdict(spec.limits).items():
        if isinstance(value, int | float) and value < 0:
            raise ApiError(422, f"field 'limits.{name}': must be 0 or more, got {value}")
