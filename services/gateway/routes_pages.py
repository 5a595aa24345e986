"""Calls that run in the page: a page claims a request the agent waits on, runs the call
once, and posts its result (docs/agui.md, "Tools that run in the page").

A claim is answered at once: 200 for the first page to claim a request, 409 for every
other. A result is a one-way send answered 202 as soon as Restate holds it; a second post
of it is 409 and changes nothing; so is a result for a request no page claimed, or
another page claimed (a page is its id and who presents it: the key, and a publishable
key's end user). Both need a write key for the agent, or a publishable key and the
token of the conversation's end user.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from services.gateway import pages
from services.gateway.auth import Owned, owned
from services.gateway.models import PageClaimed, PageClaimIn, PageResultAccepted, PageResultIn
from services.gateway.openapi import errors
from services.gateway.runtime import Runtime, runtime

router = APIRouter(tags=["control"])
Rt = Annotated[Runtime, Depends(runtime)]
RequestId = Annotated[
    str,
    Path(pattern=r"^[A-Za-z0-9_.:-]{1,120}$", description="From `approval_requested` (`page`)."),
]


@router.post(
    "/v1/agents/{address}/page-calls/{request_id}/claim",
    responses=errors(400, 401, 403, 404, 409, 413, 422, 503),
)
async def claim_page_call(
    request_id: RequestId,
    claim: PageClaimIn,
    agent: Annotated[Owned, Depends(owned("write"))],
    rt: Rt,
) -> PageClaimed:
    """Claim a call that runs in the page for this page (200, with the call to run): the
    first claim of a request wins; every other is 409 and must not run it. A page that
    claimed a request and closes its stream (`page` on the events stream) before it posts
    the result leaves the call's outcome unknown: it is never retried."""
    return await pages.claim(rt, agent, request_id, claim)


@router.post(
    "/v1/agents/{address}/page-calls/{request_id}/result",
    status_code=202,
    responses=errors(400, 401, 403, 404, 409, 413, 422, 503),
)
async def post_page_result(
    request_id: RequestId,
    result: PageResultIn,
    agent: Annotated[Owned, Depends(owned("write"))],
    rt: Rt,
) -> PageResultAccepted:
    """Post the result of a call this page claimed (202): the turn goes on with it. A
    result past its kind's cap is dropped and the model told so (`dropped: true`). A second
    post, a result for a request no page or another page claimed (the same page id
    presented by another key or end user is another page), or one whose turn ended is
    409."""
    return await pages.result(rt, agent, request_id, result)
