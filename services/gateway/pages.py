"""Calls that run in the page, as typed calls: claim a request, post its result, and tell
the agent a page's stream closed.

The agent is the one writer of what a request holds; the gateway only sends it one-way
wakes (`PageCall`). What makes a claim and a result happen once is Restate's idempotency
key: a claim is keyed by its request, a result by its request and page, and Restate
answers a second send of a key `PreviouslyAccepted` and runs nothing for it, which the
gateway answers 409. What the timeline already shows (answered, ended, claimed by
another page) is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from schemas.pages import page_result
from schemas.wake import PageCall
from services.gateway import service
from services.gateway.auth import Owned
from services.gateway.errors import ApiError
from services.gateway.models import PageClaimed, PageClaimIn, PageResultAccepted, PageResultIn
from services.gateway.runtime import Runtime
from services.ingress import IngressError
from services.projection.store import ApprovalRow

log = logging.getLogger(__name__)
_closing: set[asyncio.Task[None]] = set()
"""Close notices being sent: the stream that closed is gone, the notice outlives it."""


async def claim(rt: Runtime, agent: Owned, request_id: str, given: PageClaimIn) -> PageClaimed:
    """Claim `request_id` for `given.page`: 200 once, 409 for every later claim."""
    await service.known(rt, agent.address)
    story = await _open(rt, agent, request_id)
    if story.claimed and story.claimed != given.page:
        raise _elsewhere(request_id)
    if not story.claimed:
        key = f"page claim {request_id}"
        wake = PageCall("claimed", given.page, request_id)
        _, first = await rt.ingress.page_call(agent.address, wake, key)
        if not first:
            raise _elsewhere(request_id)
    asked = story.asked
    assert asked is not None
    return PageClaimed(
        address=agent.address,
        request_id=request_id,
        call_id=asked.call_id,
        name=asked.name,
        arguments=asked.arguments,
        page=given.page,
    )


async def result(
    rt: Runtime, agent: Owned, request_id: str, given: PageResultIn
) -> PageResultAccepted:
    """Send the result of a request `given.page` claimed (202), capped; 409 when the
    timeline shows it answered or claimed by another page, or this page sent one already."""
    row = await service.known(rt, agent.address)
    story = await _open(rt, agent, request_id)
    if story.claimed and story.claimed != given.page:
        raise _elsewhere(request_id)
    content, dropped = page_result(given.content, given.kind)
    status = "error" if dropped else given.status
    wake = PageCall("result", given.page, request_id, content, status, given.kind)
    key = f"page result {request_id} {given.page}"
    invocation, first = await rt.ingress.page_call(agent.address, wake, key)
    if not first:
        raise _ran(request_id)
    after = row.last_seq if row is not None else 0
    return PageResultAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=service.events_url(agent.address, after),
        request_id=request_id,
        dropped=dropped,
    )


async def _open(rt: Runtime, agent: Owned, request_id: str) -> ApprovalRow:
    story = await rt.projection.read(lambda store: store.approval(agent.address, request_id))
    if story is None or story.asked is None or not story.asked.page:
        raise ApiError(404, f"agent {agent.address} has no page request {request_id}")
    if story.answered:
        raise _ran(request_id)
    if story.turn_ended:
        raise ApiError(
            409, f"page request {request_id} can no longer be run: its turn ended without it"
        )
    return story


def _elsewhere(request_id: str) -> ApiError:
    return ApiError(
        409,
        f"page request {request_id} was claimed by another page, which runs it once; "
        "this page must not run it",
    )


def _ran(request_id: str) -> ApiError:
    return ApiError(
        409,
        f"page request {request_id} has its result already; it runs once, and this post "
        "changed nothing",
    )


def watched(
    rt: Runtime, agent: Owned, page: str | None, body: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """`body`, and once it ends (finished, or the page went away) a notice to the agent
    when it waits on a page call this page may hold: what the page claimed and did not
    answer gets an unknown outcome."""
    if page is None:
        return body
    return _watched(rt, agent, page, body)


async def _watched(
    rt: Runtime, agent: Owned, page: str, body: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    try:
        async for chunk in body:
            yield chunk
    finally:
        task = asyncio.get_running_loop().create_task(closed(rt, agent.address, page))
        _closing.add(task)
        task.add_done_callback(_closing.discard)


async def closed(rt: Runtime, address: str, page: str) -> None:
    """Tell the agent `page`'s stream closed, when a page call it waits on is claimed by
    that page or by no page the timeline shows yet (a claim may be on its way)."""
    try:
        held = await rt.projection.read(lambda store: store.open_page_calls(address))
        if not any(claimer in ("", page) for claimer in held.values()):
            return
        await rt.ingress.page_call(address, PageCall("closed", page), None)
    except (ApiError, IngressError, OSError) as error:
        log.warning("could not tell %s that page %s closed: %s", address, page, error)
