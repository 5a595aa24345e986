"""Calls that run in the page, as typed calls: claim a request, post its result, and tell
the agent a page's stream closed.

The agent is the one writer of what a request holds; the gateway only sends it one-way
wakes (`PageCall`). What makes a claim and a result happen once is Restate's idempotency
key: a claim is keyed by its request, a result by its request and page, and Restate
answers a second send of a key `PreviouslyAccepted` and runs nothing for it, which the
gateway answers 409. What the timeline already shows (answered, ended, claimed by
another page, claimed by no page) is refused before anything is sent, so a result that
could not be taken never spends the key of the one that can.

A page is known to the agent by its id and by who presented it (`holder`): the key, and
a publishable key's end user. Another caller that names the same page id is another
page: it cannot post that page's result, and its stream closing ends nothing of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator

from schemas.pages import page_result
from schemas.wake import PageCall
from services.gateway import service
from services.gateway.auth import Owned, Principal
from services.gateway.errors import ApiError
from services.gateway.models import PageClaimed, PageClaimIn, PageResultAccepted, PageResultIn
from services.gateway.runtime import Runtime
from services.ingress import IngressError
from services.keys import PUBLISHABLE, allows
from services.projection.store import ApprovalRow

log = logging.getLogger(__name__)
CLAIM_PATIENCE = 5.0
"""Seconds a result waits for the timeline to show its page's claim (a claim answered 200
reaches the timeline a moment after) before it is refused as unclaimed."""
_closing: set[asyncio.Task[None]] = set()
"""Close notices being sent: the stream that closed is gone, the notice outlives it."""


async def claim(rt: Runtime, agent: Owned, request_id: str, given: PageClaimIn) -> PageClaimed:
    """Claim `request_id` for `given.page`: 200 once, 409 for every later claim."""
    await service.known(rt, agent.address)
    story = await _open(rt, agent, request_id)
    page = holder(agent.caller, given.page)
    if story.claimed and story.claimed != page:
        raise _elsewhere(request_id)
    if not story.claimed:
        key = f"page claim {request_id}"
        wake = PageCall("claimed", page, request_id)
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
    timeline shows it answered, claimed by another page (or caller) or by none, or this
    page sent one already."""
    row = await service.known(rt, agent.address)
    page = holder(agent.caller, given.page)
    story = await _claimed(rt, agent, request_id)
    if story.claimed != page:
        raise _elsewhere(request_id)
    content, dropped = page_result(given.content, given.kind)
    status = "error" if dropped else given.status
    wake = PageCall("result", page, request_id, content, status, given.kind)
    key = f"page result {request_id} {page}"
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


async def _claimed(rt: Runtime, agent: Owned, request_id: str) -> ApprovalRow:
    """The request once the timeline shows a page's claim of it; 409 when it shows none
    within `CLAIM_PATIENCE` (nothing is sent, so the real claim and result still work)."""
    story = await _open(rt, agent, request_id)
    if story.claimed:
        return story
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CLAIM_PATIENCE
    follower = await rt.hub.follow(agent.address)
    try:
        while not (story := await _open(rt, agent, request_id)).claimed:
            left = deadline - loop.time()
            if left <= 0 or await follower.next(left) == "closed":
                raise ApiError(
                    409,
                    f"page request {request_id} is claimed by no page: claim the call first "
                    "(POST .../claim), then run it and post its result",
                )
    finally:
        rt.hub.unfollow(follower)
    return story


def holder(caller: Principal, page: str) -> str:
    """`page` as the agent knows it: the page's id and a fingerprint of who presents it
    (the key, and a publishable key's end user), so that no other caller can speak for
    it."""
    who = hashlib.sha256(f"{caller.key_id}\n{caller.user}".encode()).hexdigest()[:12]
    return f"{page}@{who}"


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


def may_run(agent: Owned) -> None:
    """A page that runs calls is a writer: a write key, or a publishable key's end user on
    their own conversation (`owned` let it reach only those); else 403."""
    caller = agent.caller
    if caller.scope != PUBLISHABLE and not allows(caller.scope, "write"):
        raise ApiError(
            403,
            "following as a page (?page=) needs a write key, since the page's stream decides "
            f"the outcome of the calls it claims; this key is {caller.scope}",
        )


def watched(
    rt: Runtime, agent: Owned, page: str | None, body: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """`body`, and once it ends (finished, or the page went away) a notice to the agent
    when it waits on a page call this page may hold: what the page claimed and did not
    answer gets an unknown outcome."""
    if page is None:
        return body
    return _watched(rt, agent, holder(agent.caller, page), body)


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
