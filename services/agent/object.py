"""The `Agent` virtual object: one exclusive `wake` handler, shared read-only views, and
`stop`, which reaches a turn even while its wake is running."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import restate

from schemas.address import InvalidAddressError, parse_address
from schemas.events import (
    AgentStatus,
    Approvals,
    StopAnswer,
    TimelinePage,
    TimelineQuery,
    WakeResult,
)
from schemas.harness import TurnState
from schemas.state import Answered
from schemas.wake import Approval, ChildFinished, Message, Stop, Timer, WakeEnvelope
from services.agent.control import ControlledWake
from services.agent.observers import Observer
from services.agent.state import ANSWERED, RUNNING, TURN, send_wake, status
from services.agent.timeline import read_page
from services.tools.registry import ToolRegistry

STEP_TIMEOUT = timedelta(minutes=10)
"""Above the slowest tool step; a wake waiting on a model call suspends instead."""


def agent_object(
    tools: ToolRegistry, observers: list[Observer] | None = None
) -> restate.VirtualObject:
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
        return await _dispatch(ControlledWake(ctx, address, tools, observers or []), envelope)

    @agent.handler(kind="shared")
    async def stop(ctx: restate.ObjectSharedContext) -> StopAnswer:
        address = _address(ctx.key())
        running = await ctx.get(RUNNING, type_hint=str)
        if running:
            ctx.cancel_invocation(running)
            return StopAnswer(
                True, f"Stopping the running turn of {address}: it ends within seconds."
            )
        if await ctx.get(TURN, type_hint=TurnState) is not None:
            send_wake(ctx, address, Stop())
            return StopAnswer(True, f"Stopping the waiting turn of {address}: it ends at once.")
        return StopAnswer(False, f"{address} has no turn in progress; there is nothing to stop.")

    @agent.handler(kind="shared")
    async def approvals(ctx: restate.ObjectSharedContext) -> Approvals:
        _address(ctx.key())
        turn = await ctx.get(TURN, type_hint=TurnState)
        answered = await ctx.get(ANSWERED, type_hint=Answered) or Answered()
        pending = turn.approval.request_id if turn and turn.approval else None
        return Approvals(pending, answered.requests)

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


async def _dispatch(session: ControlledWake, envelope: WakeEnvelope) -> WakeResult:
    match envelope.wake:
        case Message() as message:
            return await session.on_message(message)
        case ChildFinished() as report:
            return await session.on_child(report)
        case Approval() as answer:
            return await session.on_approval(answer)
        case Timer() as timer:
            return await session.on_timer(timer)
        case Stop() as stop:
            return await session.on_stop(stop)


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
