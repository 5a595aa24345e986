"""What the routes do, as typed calls: send a message, answer an approval, read a page,
read the recent history, follow a timeline.

The JSON and SSE routes and the AG-UI route are each a thin translation of these calls
into their own wire format; none of them calls another route or parses another route's
output. Every call takes an `Owned` address, so the tenant and scope were checked by the
caller's dependency.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import AsyncGenerator

from schemas.chat import ToolDefinition
from schemas.events import Event, TimelinePage
from schemas.questions import answer_problem
from schemas.spec import AgentSpec, WhileBusy
from schemas.wake import Approval, Message, answer_key
from services.endusers import VISITOR
from services.gateway import follow as following
from services.gateway.auth import Owned
from services.gateway.errors import ApiError, needs_kind, unknown_agent
from services.gateway.follow import Followed
from services.gateway.models import ApprovalAccepted, ApprovalIn, MessageAccepted, MessageIn
from services.gateway.runtime import Runtime
from services.keys import signature
from services.projection.store import AgentRow, ApprovalRow


async def known(rt: Runtime, address: str) -> AgentRow | None:
    """The agent's row; None for one this gateway created a moment ago; else 404."""
    row = await rt.projection.read(lambda store: store.agent(address))
    if row is None and address not in rt.recent:
        raise unknown_agent(address)
    return row


async def send(
    rt: Runtime, agent: Owned, message: MessageIn, idempotency_key: str | None
) -> MessageAccepted:
    """Send a message one-way; an agent that does not exist yet is created from the
    newest spec of `message.kind`."""
    row = await rt.projection.read(lambda store: store.agent(agent.address))
    new = row is None and agent.address not in rt.recent
    if new:
        await rt.keys.refuse_if_erased(agent.caller.tenant)
    if new and message.kind is None:
        raise needs_kind(agent.address)
    if message.kind is not None:
        await require_published(rt, agent.caller.tenant, message.kind)
    if new:
        await rt.quotas.new_agent(agent.caller.tenant)
        if agent.caller.user.startswith(VISITOR):
            rt.visitor_conversations.take(agent.caller.key_id)
    await rt.quotas.tokens(agent.caller.tenant)
    rule = await _policy(rt, agent, row, message) if row and row.status in BUSY else None
    if rule == "reject":
        raise _busy(agent.address, row)
    if row is not None and (rule == "queue" or row.status == "paused"):
        await _room(rt, row)
    mid = message_id(agent.address, idempotency_key)
    tools = tuple(ToolDefinition(t.name, t.description, t.parameters) for t in message.page_tools)
    sent = Message(
        message.text,
        kind=message.kind,
        id=mid,
        while_busy=message.while_busy,
        user=agent.caller.user,
        page_tools=tools,
    )
    invocation = await rt.ingress.send_message(
        agent.address, sent, idempotency_key, arrived=row is not None and row.status == "running"
    )
    if row is None:
        rt.recent.add(agent.address)
    after = row.last_seq if row is not None else 0
    return MessageAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=events_url(agent.address, after),
        message_id=mid,
    )


BUSY = frozenset({"running", "waiting", "parked", "paused"})
"""The statuses in which a message finds a turn in progress (or the agent paused)."""


async def _policy(rt: Runtime, agent: Owned, row: AgentRow, message: MessageIn) -> WhileBusy:
    """The policy of a message to a busy agent: its own, else its spec's (as published)."""
    if message.while_busy is not None:
        return message.while_busy
    kind = message.kind or row.kind
    spec = await rt.projection.read(lambda store: store.latest_spec(agent.caller.tenant, kind))
    return spec.while_busy if spec is not None else "queue"


async def _room(rt: Runtime, row: AgentRow) -> None:
    """429 once the agent holds `TEASPILL_AGENT_QUEUE` messages queued: the message would
    queue behind them (the agent refuses it too, should it get there)."""
    most = rt.settings.agent_queue
    queued = await rt.projection.read(lambda store: store.queued([row.address]))
    if queued.get(row.address, 0) >= most:
        raise ApiError(
            429,
            f"agent {row.address} is {row.status} and holds {most} queued messages, the most "
            "one agent may hold (TEASPILL_AGENT_QUEUE): send it again once the agent works "
            "through them",
        )


def _busy(address: str, row: AgentRow | None) -> ApiError:
    """A message whose policy is `reject` is refused at once while the agent is busy (the
    agent refuses one that finds it busy once it arrives, on its timeline)."""
    status = row.status if row is not None else "busy"
    return ApiError(
        409,
        f"agent {address} is {status} and the message's while_busy is reject, so it was "
        "not sent: send it again once the agent is idle, or with while_busy queue, "
        "interrupt or steer",
    )


def message_id(address: str, idempotency_key: str | None) -> str:
    """A new id, or one made from the idempotency key, so a retried send names the same
    message (Restate deduplicates the send; the id must agree with the one it kept)."""
    if idempotency_key is None:
        return f"m{secrets.token_hex(12)}"
    digest = hashlib.sha256(f"{address}\n{idempotency_key}".encode()).hexdigest()
    return f"m{digest[:24]}"


def events_url(address: str, after: int) -> str:
    return f"/v1/agents/{address}/events?after={after}"


async def require_published(rt: Runtime, tenant: str, kind: str) -> AgentSpec:
    """The newest spec of `kind`. The projection may lag a publish by a moment: ask the
    tenant object before saying no (404)."""
    spec = await rt.projection.read(lambda store: store.latest_spec(tenant, kind))
    if spec is None:
        spec = await rt.ingress.latest_spec(tenant, kind)
    if spec is None:
        raise ApiError(
            404,
            f"no spec of kind {kind!r} is published for tenant {tenant}: publish one with "
            "POST /v1/specs (GET /v1/deployment lists the published kinds)",
        )
    return spec


async def answer(rt: Runtime, agent: Owned, request_id: str, given: ApprovalIn) -> ApprovalAccepted:
    """Send an answer to an approval request one-way, once the timeline shows it can
    still apply (404, 409 otherwise)."""
    row = await known(rt, agent.address)
    story = await rt.projection.read(lambda store: store.approval(agent.address, request_id))
    story = _answerable(agent.address, request_id, story)
    answers = given.answers if given.approve else {}
    if given.approve and (problem := answer_problem(story.questions, answers)):
        raise ApiError(422, problem)
    by = signature(agent.caller.key_id, agent.caller.key_name)
    wake = Approval(request_id, given.approve, given.note, by=by, answers=answers)
    invocation = await rt.ingress.answer(agent.address, wake, answer_key(wake))
    after = row.last_seq if row is not None else 0
    return ApprovalAccepted(
        address=agent.address,
        invocation_id=invocation,
        after_seq=after,
        events_url=events_url(agent.address, after),
        request_id=request_id,
        approve=given.approve,
    )


def _answerable(address: str, request_id: str, story: ApprovalRow | None) -> ApprovalRow:
    if story is None:
        raise ApiError(404, f"agent {address} has no approval request {request_id}")
    if story.answered:
        raise ApiError(409, f"approval request {request_id} was already answered")
    if story.turn_ended:
        raise ApiError(
            409, f"approval request {request_id} can no longer be answered: its turn ended"
        )
    if story.asked is not None and story.asked.page:
        raise ApiError(
            409,
            f"request {request_id} runs in the page: a page claims it and posts its result "
            f"(POST /v1/agents/{address}/page-calls/{request_id}/claim, then .../result)",
        )
    return story


async def page(rt: Runtime, agent: Owned, after: int, limit: int) -> TimelinePage:
    """Up to `limit` events after `after`, and at most `TEASPILL_PAGE_MAX_BYTES` of them
    (at least one); `last_seq` says whether more are there."""
    row = await known(rt, agent.address)
    most = rt.settings.page_max_bytes
    events = await rt.projection.read(
        lambda store: store.timeline(agent.address, after, limit, max_bytes=most)
    )
    last = max(row.last_seq if row else 0, events[-1].seq if events else 0)
    return TimelinePage(tuple(events), last)


async def history(rt: Runtime, agent: Owned) -> list[Event]:
    """The newest whole turns within `TEASPILL_HISTORY_MAX_BYTES`, in seq order."""
    most = rt.settings.history_max_bytes
    return await rt.projection.read(lambda store: store.recent(agent.address, most))


def follow(rt: Runtime, agent: Owned, after: int) -> AsyncGenerator[Followed, None]:
    """Every recorded event after `after` once, in seq order, with live deltas and
    retractions between them and keepalives while nothing happens."""
    return following.follow(
        rt.hub,
        rt.projection,
        agent.address,
        after,
        heartbeat=rt.heartbeat,
        page_bytes=rt.settings.page_max_bytes,
    )
