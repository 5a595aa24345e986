"""The `Agent` virtual object: one exclusive `wake` handler, shared read-only views, and
`stop`, which reaches a turn even while its wake is running."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import msgspec
import restate

from schemas.address import InvalidAddressError, parse_address
from schemas.events import (
    AgentForked,
    AgentStatus,
    Approvals,
    Event,
    StopAnswer,
    TimelinePage,
    TimelineQuery,
    WakeResult,
)
from schemas.harness import AwaitingApproval
from schemas.lifecycle import ForkQuery, ForkRequest, ForkSource, WorkspaceFork
from schemas.projection import EventBatch
from schemas.spec import AgentSpec
from schemas.state import Bell
from schemas.wake import Arrival, Message, Pause, Stop, WakeEnvelope, policy
from services.agent.archiving import (
    Archives,
    archive_handlers,
    archived_page,
    has_copy,
    restore,
    retired_reads,
)
from services.agent.arrivals import QUEUE_LIMIT
from services.agent.driver import Driver, LocalModel, Retention
from services.agent.endings import status
from services.agent.fork import (
    ForkError,
    chunks_of,
    forked_events,
    forked_record,
    last_ended,
    source_of,
)
from services.agent.machine import stops
from services.agent.observers import Observer
from services.agent.pipeline import TenantQuotas
from services.agent.store import RAW, RECORD, Preloaded, Reader, Store, ring
from services.agent.timeline import Sink
from services.contracts import (
    AGENT,
    APPROVALS,
    ARRIVED,
    FORK,
    FORK_SOURCE,
    PAUSE,
    SPECS,
    STATUS,
    STOP,
    TAKE_AGENT,
    TIMELINE,
    WAKE,
    WORKSPACE_FORK,
    WORKSPACE_FORKABLE,
    Empty,
)
from services.durable import call, send
from services.harness.registry import BUILTIN_HARNESSES, Harness
from services.lifecycle.tombstone import refuse_if_erased
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
    archives: Archives | None = None,
    keep_chunks: int = 0,
) -> restate.VirtualObject:
    """`sink` is where wakes hand their events (the projection of this process). `model`,
    when given, runs model steps in this process as local journaled steps; without it
    they are durable calls to the `Model` service. `offer` names the models and tools a
    spec sent with a message may use; `quotas`, what the tenant's agents count together
    in its `TenantUsage` object; `queue_limit`, the most messages one agent holds queued
    (`TEASPILL_AGENT_QUEUE`); `harnesses`, those specs may name; `archives`, where
    archived agents are kept (without it, none is archived or looked for); `keep_chunks`,
    the timeline chunks an agent's state keeps, older ones retired to `archives`
    (`TEASPILL_TIMELINE_KEEP_CHUNKS`; 0, or no archives: all are kept)."""
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
        preloaded = None
        if archives is not None:  # an agent without state may be an archived one
            raw_record = await ctx.get(RECORD, serde=RAW)
            if raw_record is not None or not (await restore(ctx, archives, address)).keys:
                preloaded = Preloaded(raw_record)
        driver = Driver(
            ctx,
            address,
            tools,
            preloaded=preloaded,
            sink=sink,
            model=model,
            observers=observers or (),
            quotas=counted,
            queue_limit=queue_limit,
            harnesses=harnesses,
            retention=_retention(archives, address, keep_chunks),
        )
        arrived = envelope.wake
        attributes = genai.wake(address, arrived)
        with tracing.span("wake", tracing.attempt(ctx), attributes, links=genai.links(arrived)):
            return await driver.run(envelope.wake)

    _controls(agent)
    _views(agent, archives)
    _forks(agent, sink, counted, archives)
    if archives is not None:
        archive_handlers(agent, archives, _address)
    return agent


def _retention(archives: Archives | None, address: str, keep: int) -> Retention | None:
    if archives is None or keep < 1:
        return None

    async def put(first: int, chunks: Sequence[bytes]) -> None:
        await archives.retire(address, first, chunks)

    return keep, put


def _controls(agent: restate.VirtualObject) -> None:
    """The shared handlers that reach a turn while its wake runs: stop, arrived, pause."""

    @agent.handler(name=STOP.name, kind="shared")
    async def stop(ctx: restate.ObjectSharedContext, asked: Stop) -> StopAnswer:
        """`asked` may name the turn to stop (an empty body, or one sent before a stop
        carried a turn, stops whichever is in progress)."""
        address = _address(ctx.key())
        wanted = asked or Stop()
        reader = Reader(ctx)
        stored = await reader.stored()
        record = stored.record
        running = await reader.running(stored)
        if running and stops(wanted, running.turn):
            ctx.cancel_invocation(running.invocation)
            return StopAnswer(True, f"Stopping {address}'s running turn.")
        # The wake records the outcome on the timeline, for senders that do not wait.
        send(ctx, WAKE, WakeEnvelope(wanted), key=address)
        if running:
            return StopAnswer(False, f"{address}'s running turn is not turn {wanted.turn}.")
        if record.turn is not None and stops(wanted, record.turn.number):
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


def _views(agent: restate.VirtualObject, archives: Archives | None) -> None:
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
        address = _address(ctx.key())
        if query.after_seq < 0 or query.limit < 1:
            raise restate.TerminalError(
                "after_seq must be 0 or more and limit 1 or more", status_code=400
            )
        reader = Reader(ctx, retired_reads(ctx, archives, address))
        events, last_seq = await reader.page(query.after_seq, query.limit)
        if not last_seq and archives is not None:
            page = await archived_page(ctx, archives, address, query)
            if page is not None:
                return page
        return TimelinePage(events=events, last_seq=last_seq)


def _forks(
    agent: restate.VirtualObject, sink: Sink, counted: TenantQuotas, archives: Archives | None
) -> None:
    """`fork`, on the new agent's key, and the source's shared `fork_source`
    (`services/agent/fork.py` says what a fork holds)."""

    @agent.handler(name=FORK.name)
    async def fork(ctx: restate.ObjectContext, request: ForkRequest) -> AgentStatus:
        address = _address(ctx.key())
        source = _fork_source(request, address)
        store = Store(ctx)
        await _unused(ctx, store, archives, address)
        await refuse_if_erased(ctx, parse_address(address).tenant)
        found = await call(ctx, FORK_SOURCE, ForkQuery(request.seq), key=source)
        spec = found.spec or await _published(ctx, source, found)
        workspace = WorkspaceFork(source, address, spec.workspace.quota_mb)
        await call(ctx, WORKSPACE_FORKABLE, workspace)
        if counted.agents:
            await call(ctx, TAKE_AGENT, Empty(), key=parse_address(address).tenant)
        events = await _copied(ctx, source, request.seq)
        at = datetime.fromtimestamp(await ctx.time(), UTC)
        forked = AgentForked(source, request.seq, request.by)
        try:
            timeline = forked_events(events, address, found, forked, at)
        except ForkError as error:
            raise restate.TerminalError(str(error), error.status) from error
        await call(ctx, WORKSPACE_FORK, workspace)
        for index, chunk in enumerate(chunks_of(timeline)):
            store.write_chunk(index, chunk)
        for index, segment in enumerate(found.segments):
            store.write_segment(index, segment)
        record = forked_record(found, spec, timeline)
        await store.finish(record)
        await sink.write(EventBatch(tuple(timeline), "idle"))
        return status(address, record, record.timeline, running=False)

    @agent.handler(name=FORK_SOURCE.name, kind="shared")
    async def fork_source(ctx: restate.ObjectSharedContext, query: ForkQuery) -> ForkSource:
        address = _address(ctx.key())
        reader = Reader(ctx, retired_reads(ctx, archives, address))
        stored = await reader.stored()
        mark = await reader.mark(stored.record)
        if not mark.last_seq:
            raise restate.TerminalError(f"{address} has no timeline to fork.", 404)
        events = await reader.events_upto(min(max(query.seq, 0), mark.last_seq))
        record = stored.record
        held = [s for s in (record.turn.spec if record.turn else None, record.spec) if s]
        segments = await reader.history(stored, last_ended(events, query.seq))
        try:
            return source_of(
                events,
                query.seq,
                last_seq=mark.last_seq,
                context=record.context,
                segments=segments,
                held=held,
            )
        except ForkError as error:
            raise restate.TerminalError(str(error), error.status) from error


async def _unused(
    ctx: restate.ObjectContext, store: Store, archives: Archives | None, address: str
) -> None:
    """Refuse a fork onto an agent: one with a timeline, or one archived (its state is out
    of Restate, its workspace is not)."""
    if (record := await store.record()).timeline.last_seq or record.turns:
        raise restate.TerminalError(
            f"{address} exists already: a fork needs an address no agent has.", 409
        )
    if archives is not None and await has_copy(ctx, archives, address):
        raise restate.TerminalError(
            f"{address} is an archived agent: a fork needs an address no agent has.", 409
        )


def _fork_source(request: ForkRequest, address: str) -> str:
    source = _address(request.source)
    if parse_address(source).tenant != parse_address(address).tenant:
        raise restate.TerminalError("A fork stays in its source's tenant.", 403)
    if source == address:
        raise restate.TerminalError("A fork needs an address of its own.", 409)
    return source


async def _published(ctx: restate.ObjectContext, source: str, found: ForkSource) -> AgentSpec:
    """The spec version the source's last turn ran with, as the tenant published it."""
    versions = await call(ctx, SPECS, Empty(), key=parse_address(source).tenant)
    for published in versions.versions:
        if (published.spec.kind, published.spec.version) == (found.spec_kind, found.spec_version):
            return published.spec
    raise restate.TerminalError(
        f"{source} ran with version {found.spec_version} of {found.spec_kind!r}, which it no "
        "longer holds and its tenant has not published: a fork would not run with the same spec.",
        409,
    )


async def _copied(ctx: restate.ObjectContext, source: str, seq: int) -> list[Event]:
    """The source's first `seq` events, a page at a time."""
    events: list[Event] = []
    while len(events) < seq:
        query = TimelineQuery(after_seq=len(events), limit=min(seq - len(events), 500))
        page = await call(ctx, TIMELINE, query, key=source)
        if not page.events:
            break
        events.extend(page.events)
    return events


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
