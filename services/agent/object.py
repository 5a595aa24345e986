"""The `Agent` virtual object: one exclusive `wake` handler, shared read-only views, and
`stop`, which reaches a turn even while its wake is running."""

from __future__ import annotations

from collections.abc import Mapping
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
from schemas.harness import AwaitingApproval
from schemas.state import Bell
from schemas.wake import Arrival, Message, Pause, Stop, WakeEnvelope, policy
from services.agent.arrivals import QUEUE_LIMIT
from services.agent.driver import Driver, LocalModel
from services.agent.endings import status
from services.agent.observers import Observer
from services.agent.pipeline import TenantQuotas
from services.agent.store import Reader, ring
from services.agent.timeline import Sink
from services.contracts import (
    AGENT,
    APPROVALS,
    ARRIVED,
    PAUSE,
    STATUS,
    STOP,
    TIMELINE,
    WAKE,
    Empty,
)
from services.durable import send
from services.harness.registry import BUILTIN_HARNESSES, Harness
from services.observe import genai, tracing
from services.specs import Offer, SpecError, check_spec
from services.tools.registry import ToolRegistry

STEP_TIMEOUT = timedelta(minutes=15)
"""Above the slowest tool step and the slowest local model step on a CPU."""


def agent_object(
    tools: ToolRegistry,
    sink: Sink,
    observers: list[Observer] | None = None,
    model: LocalModel | None = None,
    offer: Offer | None = None,
    *,
    quotas: TenantQuotas | None = None,
    queue_limit: int = QUEUE_LIMIT,
    harnesses: Mapping[str, Harness] = BUILTIN_HARNESSES,
) -> restate.VirtualObject:
    """`sink` is where wakes hand their events (the projection of this process). `model`,
    when given, runs model steps in this process as local journaled steps; without it
    they are durable calls to the `Model` service. `offer` names the models and tools a
    spec sent with a message may use; `quotas`, what the tenant's agents count together
    in its `TenantUsage` object; `queue_limit`, the most messages one agent holds queued
    (`TEASPILL_AGENT_QUEUE`); `harnesses`, those specs may name."""
    counted = quotas or TenantQuotas()
    agent = restate.VirtualObject(
        AGENT,
        description="An AI agent: handles one wake at a time and records a timeline.",
        inactivity_timeout=STEP_TIMEOUT,
        abort_timeout=timedelta(minutes=1),
        state_preload=False,
    )

    @agent.handler(name=WAKE.name, input_serde=restate.serde.BytesSerde())
    async def wake(ctx: restate.ObjectContext, raw: bytes) -> WakeResult:
        address = _address(ctx.key())
        envelope = _decode(raw)
        _check_inline(envelope, offer, address)
        driver = Driver(
            ctx,
            address,
            tools,
            sink=sink,
            model=model,
            observers=observers or (),
            quotas=counted,
            queue_limit=queue_limit,
            harnesses=harnesses,
        )
        with tracing.span("wake", tracing.attempt(ctx), genai.wake(address, envelope.wake)):
            return await driver.run(envelope.wake)

    _controls(agent)
    _views(agent)
    return agent


def _controls(agent: restate.VirtualObject) -> None:
    """The shared handlers that reach a turn while its wake runs: stop, arrived, pause."""

    @agent.handler(name=STOP.name, kind="shared")
    async def stop(ctx: restate.ObjectSharedContext) -> StopAnswer:
        address = _address(ctx.key())
        reader = Reader(ctx)
        stored = await reader.stored()
        record = stored.record
        running = await reader.running(stored)
        if running:
            ctx.cancel_invocation(running.invocation)
            return StopAnswer(True, f"Stopping {address}'s running turn.")
        # The wake records the outcome on the timeline, for senders that do not wait.
        send(ctx, WAKE, WakeEnvelope(Stop()), key=address)
        if record.turn is not None:
            return StopAnswer(True, f"Stopping {address}'s turn, which waits for an answer.")
        return StopAnswer(False, f"{address} has no turn in progress; there is nothing to stop.")

    @agent.handler(name=ARRIVED.name, kind="shared")
    async def arrived(ctx: restate.ObjectSharedContext, arrival: Arrival) -> Empty:
        """A message that may act on the turn running now: `interrupt` stops it as a stop
        does, `steer` rings its bell, `queue` its queue bell (the turn records it queued);
        the message's own wake does the rest once the running one ends (and nothing, for
        a message that joined the running turn)."""
        await _reach(ctx, arrival)
        return Empty()

    @agent.handler(name=PAUSE.name, kind="shared")
    async def pause(ctx: restate.ObjectSharedContext, pause: Pause) -> Empty:
        """A running turn hears the pause at its next round boundary; the `Pause` wake
        holds the agent once that wake (or none) runs."""
        reader = Reader(ctx)
        running = await reader.running(await reader.stored())
        if running is not None and running.bell:
            ring(ctx, running.bell, Bell(pause=pause))
        send(ctx, WAKE, WakeEnvelope(pause), key=_address(ctx.key()))
        return Empty()


async def _reach(ctx: restate.ObjectSharedContext, arrival: Arrival) -> None:
    """What `arrived` does to the turn running beside it, if one is."""
    reader = Reader(ctx)
    stored = await reader.stored()
    running = await reader.running(stored)
    message = arrival.message
    if running is None or running.invocation == arrival.invocation:
        return  # no turn runs beside the message: its wake decides
    spec = stored.record.turn.spec if stored.record.turn else stored.record.spec
    match policy(message, spec):
        case "interrupt":
            ctx.cancel_invocation(running.invocation)
        case "steer" if message.id and running.bell:
            ring(ctx, running.bell, Bell(message=message))
        case "queue" if running.queue_bell:
            ring(ctx, running.queue_bell, Bell(message=message))


def _views(agent: restate.VirtualObject) -> None:
    """The shared read-only handlers."""

    @agent.handler(name=APPROVALS.name, kind="shared")
    async def approvals(ctx: restate.ObjectSharedContext) -> Approvals:
        _address(ctx.key())
        record = (await Reader(ctx).stored()).record
        phase = record.turn.phase if record.turn is not None else None
        waiting = phase.waiting() if isinstance(phase, AwaitingApproval) else ()
        pending = waiting[0].request_id if waiting else None
        return Approvals(pending, record.answered)

    @agent.handler(name=STATUS.name, kind="shared")
    async def get_status(ctx: restate.ObjectSharedContext) -> AgentStatus:
        address = _address(ctx.key())
        reader = Reader(ctx)
        stored = await reader.stored()
        mark = await reader.mark(stored.record)
        running = bool(await reader.running(stored))
        return status(address, stored.record, mark, running=running)

    @agent.handler(name=TIMELINE.name, kind="shared")
    async def timeline(ctx: restate.ObjectSharedContext, query: TimelineQuery) -> TimelinePage:
        _address(ctx.key())
        if query.after_seq < 0 or query.limit < 1:
            raise restate.TerminalError(
                "after_seq must be 0 or more and limit 1 or more", status_code=400
            )
        events, last_seq = await Reader(ctx).page(query.after_seq, query.limit)
        return TimelinePage(events=events, last_seq=last_seq)


def _check_inline(envelope: WakeEnvelope, offer: Offer | None, address: str) -> None:
    """A spec sent with a message is checked like a published one before anything
    happens (a child's spec is its parent's, checked already)."""
    wake = envelope.wake
    if isinstance(wake, Message) and wake.spec is not None and wake.parent is None:
        try:
            check_spec(wake.spec, "The message's spec", offer, parse_address(address).tenant)
        except SpecError as error:
            raise restate.TerminalError(str(error), status_code=422) from error


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
