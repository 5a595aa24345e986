"""A turn that one message starts, followed on the timeline: what the MCP and A2A servers
share.

Both send a message to an agent of a published kind through the service layer (a write
key, the key's tenant checked by `auth.own`), then follow the agent's timeline for the
turn whose `turn_started` carries the id the gateway gave that message, never its text.
A message sent again with the same idempotency key is the same message: it is followed
from where the timeline first names it.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from pydantic import ValidationError

from schemas.events import Event, MessageQueued, MessageRejected, TurnEnded, TurnStarted
from schemas.spec import AgentSpec
from services.gateway import service
from services.gateway.auth import Owned, Principal, own
from services.gateway.errors import ApiError, validation_message
from services.gateway.live import LiveItem
from services.gateway.models import MessageIn
from services.gateway.runtime import Runtime

TurnItem = Event | LiveItem
"""What following one turn gives: its recorded events and its live text."""


@dataclass(frozen=True)
class MessageSent:
    agent: Owned
    message_id: str
    after: int
    """The seq to follow the message's turn from."""
    story: list[Event]
    """What the timeline showed of the message before it was sent (`message_story`):
    empty, unless it is a message sent again."""


async def published_kinds(rt: Runtime, tenant: str) -> dict[str, AgentSpec]:
    """The newest spec of each kind `tenant` published, in name order."""
    specs = await rt.projection.read(lambda store: store.specs(tenant))
    newest = {published.spec.kind: published.spec for published in specs}
    return dict(sorted(newest.items()))


def call_id(tenant: str, kind: str, key: str | None) -> str:
    """Random for a call without a key of the caller's; else made from it, so a call sent
    again names the same agent and the same message."""
    if key is None:
        return secrets.token_hex(8)
    return hashlib.sha256(f"{tenant}\n{kind}\n{key}".encode()).hexdigest()[:16]


def new_agent(tenant: str, door: str, kind: str, call: str) -> str:
    """The address of the agent of `kind` that a call through `door` makes."""
    return f"{tenant}.{door}-{kind.lower()[:24]}-{call}"


async def send_to_kind(
    rt: Runtime,
    caller: Principal,
    kind: str,
    address: str,
    text: object,
    *,
    idempotency_key: str,
    fields: tuple[str, str],
) -> MessageSent:
    """Send `text` to the agent `address` (made from `kind` if it is new), as
    `POST /v1/agents/{address}/messages` would. `fields` name the address and the text in
    a sentence about them, as the caller's protocol calls them."""
    address_field, text_field = fields
    agent = own(caller, address, "write", doing="calling an agent", field=address_field)
    try:
        message = MessageIn.model_validate({"text": text, "kind": kind})
    except ValidationError as error:
        status, sentence = validation_message(error.errors())
        raise ApiError(status, sentence.replace("text: ", f"{text_field}: ", 1)) from error
    message_id = service.message_id(address, idempotency_key)
    story = await rt.projection.read(lambda store: store.message_story(address, message_id))
    accepted = await service.send(rt, agent, message, idempotency_key)
    after = story[0].seq - 1 if story else accepted.after_seq
    return MessageSent(agent, accepted.message_id, after, story)


async def follow_turn(
    rt: Runtime, agent: Owned, after: int, message_id: str
) -> AsyncGenerator[TurnItem, None]:
    """The items of the turn `message_id` starts, from its `turn_started` to its
    `turn_ended`, after its `message_queued` if it waited behind another turn; or the
    `message_rejected` of a message the agent refused (no turn starts then), and nothing
    after it. It stops early when the gateway stops following."""
    items = service.follow(rt, agent, after)
    turn: int | None = None
    try:
        async for item in items:
            if isinstance(item, str):
                continue
            if turn is None and _queued(item, message_id):
                yield item
            if turn is None and _rejected(item, message_id):
                yield item
                return
            if turn is None and _starts(item, message_id):
                turn = item.turn
            if turn is None or item.turn != turn:
                continue
            yield item
            if isinstance(item, Event) and isinstance(item.body, TurnEnded):
                return
    finally:
        await items.aclose()


def _queued(item: TurnItem, message_id: str) -> bool:
    return (
        isinstance(item, Event)
        and isinstance(item.body, MessageQueued)
        and item.body.message_id == message_id
    )


def _rejected(item: TurnItem, message_id: str) -> bool:
    return (
        isinstance(item, Event)
        and isinstance(item.body, MessageRejected)
        and item.body.message_id == message_id
    )


def _starts(item: TurnItem, message_id: str) -> bool:
    return (
        isinstance(item, Event)
        and isinstance(item.body, TurnStarted)
        and item.body.message_id == message_id
    )
