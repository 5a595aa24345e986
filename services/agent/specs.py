"""Which spec a new turn runs with."""

from __future__ import annotations

import msgspec
import restate

from schemas.address import parse_address
from schemas.catalog import SpecAnswer, SpecQuery
from schemas.spec import AgentSpec
from schemas.wake import Message

SPEC = "spec"
TENANT = "Tenant"


async def resolve_spec(
    ctx: restate.ObjectContext, address: str, message: Message
) -> AgentSpec | None:
    """The spec for `message`'s turn, remembered for the agent's later turns.

    A spec carried by the message wins. Otherwise, for a published kind (named by the
    message, or the kind the agent was created from), the newest published version: a
    publish affects the next turn, never one in progress. Otherwise the spec the agent
    had.
    """
    if message.spec is not None:
        ctx.set(SPEC, message.spec)
        return message.spec
    stored = await ctx.get(SPEC, type_hint=AgentSpec)
    kind = message.kind or (stored.kind if stored is not None and stored.version > 0 else None)
    if kind is None:
        return stored
    query = msgspec.json.encode(SpecQuery(kind))
    tenant = parse_address(address).tenant
    raw = await ctx.generic_call(TENANT, "spec", query, key=tenant)
    published = msgspec.json.decode(raw, type=SpecAnswer).spec
    if published is not None:
        ctx.set(SPEC, published)
    return published


def missing_spec(address: str, message: Message) -> str:
    if message.kind:
        tenant = parse_address(address).tenant
        return f"No spec of kind {message.kind!r} is published for tenant {tenant!r}."
    return f"Agent {address} has no spec yet: its first message must carry a spec or a kind."
