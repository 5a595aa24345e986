"""What the deployment offers a tenant: the models and tools its specs may name and the
kinds it has published, so a client (the CLI, the console) asks the deployment instead of
guessing from its own environment."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from services.gateway.auth import Principal, require
from services.gateway.models import DeploymentOut, KindOut
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime

router = APIRouter(tags=["specs"])
Rt = Annotated[Runtime, Depends(runtime)]


@router.get("/v1/deployment", responses=errors(401, 503))
async def deployment(
    caller: Annotated[Principal, Depends(require("read"))], rt: Rt
) -> DeploymentOut:
    """The model and tool names a publish is checked against (from the Tenant object, which
    checks them), and the key's tenant's published kinds, newest version of each."""
    offered = await rt.ingress.offered(caller.tenant)
    specs = await rt.projection.read(lambda store: store.specs(caller.tenant))
    newest = {published.spec.kind: published for published in specs}
    kinds = [
        KindOut(kind=kind, version=p.spec.version, model=p.spec.model)
        for kind, p in sorted(newest.items())
    ]
    return DeploymentOut(
        models=list(offered.models),
        tools=list(offered.tools),
        checked=offered.known,
        problem=offered.problem,
        kinds=kinds,
    )
