"""The OpenAPI description: pydantic models for what the gateway itself defines, and the
`schemas` msgspec types (events, specs, live deltas) as components, so that clients in
other languages see the very types the projection stores."""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.events import TimelinePage
from schemas.knowledge import Document, DocumentList, PassageList
from schemas.live import LiveBatch, Retraction
from schemas.memory import MemoryHitList, MemoryList, MemoryRecord
from schemas.projection import ProjectedBatch
from schemas.schedule import Schedule, ScheduleList
from schemas.spec import AgentSpec
from schemas.tenant import PublishedSpec, SpecVersions
from services.gateway.models import ErrorOut

REF = "#/components/schemas/{name}"
SHARED_TYPES = (
    TimelinePage,
    PublishedSpec,
    SpecVersions,
    AgentSpec,
    LiveBatch,
    Retraction,
    ProjectedBatch,
    Schedule,
    ScheduleList,
    Document,
    DocumentList,
    PassageList,
    MemoryRecord,
    MemoryList,
    MemoryHitList,
)


def component_schemas() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(SHARED_TYPES, ref_template=REF)
    return components


def json_of(name: str | tuple[str, ...], description: str) -> dict[str, Any]:
    """A response (or body) whose JSON is the msgspec type `name` (one of them, for a
    tuple of names)."""
    names = (name,) if isinstance(name, str) else name
    refs = [{"$ref": REF.format(name=one)} for one in names]
    schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route may give, all of them `ErrorOut`."""
    return {status: {"model": ErrorOut, "description": _WHY[status]} for status in statuses}


_WHY = {
    400: "Malformed input: bad JSON, a bad address or header.",
    401: "No valid API key (or, for /internal/live, no valid live token).",
    403: "The key's scope does not cover this route, or live deltas are switched off.",
    404: "Unknown agent (or one of another tenant), or an unpublished spec kind.",
    409: "Restate refused the change.",
    410: "The key's tenant is being erased or was erased: nothing can be made in it again.",
    413: "The request body, or a document in it, is too large.",
    408: "The request body did not arrive in time.",
    415: "The body is not of the content type the route takes.",
    422: "A field is missing or has the wrong type or value.",
    429: "A limit of the key or the tenant is reached: the message says which; "
    "`Retry-After` says when to retry where waiting helps.",
    503: "The projection or Restate ingress cannot be reached right now.",
}
