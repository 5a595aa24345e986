"""The `Agent` virtual object: one exclusive `wake` handler, shared read-only views."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import restate

from schemas.address import InvalidAddressError, parse_address
from schemas.events import AgentStatus, TimelinePage, TimelineQuery, WakeResult
from schemas.wake import ChildFinished, Message, Timer, WakeEnvelope
from services.agent.agent import AgentWake, status
from services.agent.timeline import read_page
from services.tools.registry import ToolRegistry

STEP_TIMEOUT = timedelta(minutes=10)
"""Above the slowest tool step; a wake waiting on a model call suspends instead."""


def agent_object(tools: ToolRegistry) -> restate.VirtualObject:
    agent = restate.VirtualObject(
        "Agent",
        description="An AI agent: handles one wake at a time and records a timeline.",
        inactivity_timeout=STEP_TIMEOUT,
        abort_timeout=timedelta(minutes=1),
        state_preload=False,
    )

    @agent.handler(input_serde=restate.serde.BytesSerde())
    async def wake(ctx: restate.ObjectContext, raw: bytes) -> WakeResult:
        address = _address(ctx.key())
        envelope = _decode(raw)
        session = AgentWake(ctx, address, tools)
        match envelope.wake:
            case Message() as message:
                return await session.on_message(message)
            case ChildFinished() as report:
                return await session.on_child(report)
            case Timer():
                return WakeResult(await status(ctx, address))

    @agent.handler(kind="shared", name="status")
    async def get_status(ctx: restate.ObjectSharedContext) -> AgentStatus:
        return await status(ctx, _address(ctx.key()))

    @agent.handler(kind="shared")
    async def timeline(ctx: restate.ObjectSharedContext, query: TimelineQuery) -> TimelinePage:
        _address(ctx.key())
        if query.after_seq < 0 or query.limit < 1:
            raise restate.TerminalError(
                "after_seq must be 0 or more and limit 1 or more", status_code=400
            )
        return await read_page(ctx, query.after_seq, query.limit)

    return agent


def _address(key: str) -> str:
    try:
        return str(parse_address(key))
    except InvalidAddressError as error:
        raise restate.TerminalError(str(error), status_code=400) from error


def _decode(raw: bytes) -> WakeEnvelope:
    try:
        return msgspec.json.decode(raw, type=WakeEnvelope)
    except msgspec.DecodeError as error:
        raise restate.TerminalError(
            f"The wake is not valid: {error}. Send JSON like "
            '{"wake": {"type": "message", "text": "hello"}}.',
            status_code=400,
        ) from error
