"""Artifacts: the bytes of a file an agent's workspace tool wrote, by content hash.

Served under the same key and tenant rules as the agent's timeline, and only when the
agent's timeline records the artifact: a hash another agent wrote is not found here.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import FileResponse

from schemas.workspace import artifact_name
from services.gateway.auth import Owned, owned
from services.gateway.errors import ApiError
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime

router = APIRouter(tags=["artifacts"])
Rt = Annotated[Runtime, Depends(runtime)]


@router.get(
    "/v1/agents/{address}/artifacts/{sha256}",
    response_class=FileResponse,
    responses={
        200: {
            "description": "The artifact's bytes.",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        },
        **errors(400, 401, 404, 422, 503),
    },
)
async def artifact(
    agent: Annotated[Owned, Depends(owned("read"))],
    rt: Rt,
    sha256: Annotated[str, Path(max_length=64, description="The artifact's sha256, in hex.")],
) -> FileResponse:
    """A file the agent wrote, as its `artifact_written` event names it."""
    name = artifact_name(sha256)
    if name is None:
        raise ApiError(400, f"{sha256!r} is not a sha256: give 64 lower-case hex digits")
    recorded = await rt.projection.read(lambda store: store.wrote_artifact(agent.address, sha256))
    path = rt.settings.home / "artifacts" / name
    if not recorded or not path.is_file():
        raise ApiError(404, f"{agent.address} has no artifact {sha256}")
    return FileResponse(
        path,
        media_type="application/octet-stream",
        headers={"ETag": f'"{sha256}"', "Cache-Control": "private, max-age=31536000"},
    )
