"""The wake's driver: the one module of the agent that holds the Restate context.

It reads the clock and the record in one round trip, feeds the machine (`machine.py`) what
arrived, and performs what comes back through one `perform`: the machine's effects (emit,
send a wake, remember a segment, find a spec, drive the turn, refuse) and, while a turn is
driven, the harness's commands (model and tool steps, folds, recall, spawn, approval and
waits). Spawning is a `SendWake` like a report to a parent or a timer. The bookkeeping of
a round (clock, usage, ledger, running time) is `books.py`, pure; the events go to the
`Timeline`, whose sink was chosen when the service was composed; the state keys are the
`Store`'s. The record is written once, at the wake's end.

Every model call crosses the policy pipeline first and runs as a local journaled step
when the model is served by this process (`LocalModel`), else as a durable call to the
`Model` service. Tool steps are `ctx.run` steps keyed by agent, turn, round and call;
workspace tools are durable calls to the `Workspace` service on the execution plane.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import ParamSpec, Protocol, overload

import msgspec
import restate

from schemas.address import parse_address
from schemas.chat import ToolCall
from schemas.events import (
    ApprovalRequested,
    ArtifactWritten,
    ChildSpawned,
    EventBody,
    FailedBy,
    HandedOff,
    MemoriesExtracted,
    Outcome,
    ToolCalled,
    ToolFinished,
    Waiting,
    WakeResult,
)
from schemas.harness import (
    Ack,
    Arrived,
    AskApproval,
    Between,
    CallModel,
    CallTool,
    Command,
    Fail,
    HandOff,
    Handover,
    Recall,
    RecordFold,
    Refuse,
    Reply,
    Result,
    Spawn,
    Spawned,
    Summarize,
    Summary,
    Told,
    ToolResult,
    TurnState,
    Wait,
)
from schemas.mcp import PREFIX as MCP_PREFIX
from schemas.mcp import McpCatalog, McpTool
from schemas.memory import MemoryNote, MemoryShown
from schemas.model import ModelReply, ModelRequest
from schemas.spec import COMPOSITION_HARNESS, grants
from schemas.state import AgentRecord
from schemas.tenant import SpecAnswer, SpecQuery, TokenLease, TokensSettled
from schemas.wake import Message, ParentRef, SpanRef, Wake, WakeEnvelope
from schemas.workspace import WORKSPACE_TOOL_NAMES, WorkspaceCall
from services.agent.arrivals import QUEUE_LIMIT
from services.agent.books import Books, Clock, model_events
from services.agent.endings import ending, kept, status
from services.agent.funding import agent_refusal, opening_want, tenant_refusal
from services.agent.grants import (
    PolicyError,
    definitions,
    first_message,
    spawn_refusal,
    tenant_writes,
)
from services.agent.machine import (
    Drive,
    Effect,
    Emit,
    FindSpec,
    Input,
    RefuseWake,
    Remember,
    SendWake,
    SpecFound,
    TurnRan,
    TurnStopped,
    Unfunded,
    react,
    state_of,
)
from services.agent.observers import Observer
from services.agent.pipeline import (
    BudgetExceededError,
    Lease,
    Pipeline,
    TenantQuotas,
    day_of,
    estimate,
    needs_clock,
    total,
)
from services.agent.store import Doorbell, Preloaded, Store
from services.agent.timeline import Sink, Timeline
from services.contracts import (
    COUNT_AGENT,
    GENERATE,
    LATEST_SPEC,
    LEASE_TOKENS,
    REMEMBER,
    SETTLE_TOKENS,
    TAKE_AGENT,
    WAKE,
    WORKSPACE_CALL,
    Empty,
)
from services.durable import CANCELLED, Asked, ask, call, send, step_options
from services.harness.extraction import extraction_request, facts
from services.harness.loop import TurnInput
from services.harness.recall import answer, parse
from services.harness.registry import BUILTIN_HARNESSES, Harness, start
from services.lifecycle.tombstone import refuse_if_erased
from services.observe import genai, tracing
from services.tools.memory import SEARCH_MEMORY, own_scope
from services.tools.registry import ToolRegistry

TOO_MANY = 429
NO_QUOTAS = TenantQuotas()
log = logging.getLogger("teaspill.agent")

P = ParamSpec("P")

CLOCK_STEP = "timestamp"
"""The clock step's name: the one `ctx.time()` journals, so journals of either replay."""


class LocalModel(Protocol):
    """A model served by this process: the composition root hands it in when both planes
    share one deployment, so a model step costs local journaled steps of the wake, not an
    invocation."""

    def step(self, ctx: restate.Context, request: ModelRequest) -> Awaitable[ModelReply]: ...


Retention = tuple[int, Callable[[int, Sequence[bytes]], Awaitable[None]]]
"""Timeline retention: the chunks the state keeps, and where the older ones are put (the
archive store), as `Store.retire` takes them."""


class Driver:
    _timeline: Timeline
    """The wake's events (made once the record is read)."""
    _books: Books
    """The bookkeeping of the turn being driven (made when a drive begins)."""
    _bell: Doorbell
    """The bell of the turn being driven (made when a drive begins)."""
    _done: Awaitable[float]
    """A step of this wake that has completed (the clock's): the bell is heard beside it."""
    _catalog: McpCatalog = McpCatalog()
    """The MCP tools the turn being driven sees (listed when the drive begins)."""

    def __init__(
        self,
        ctx: restate.ObjectContext,
        address: str,
        tools: ToolRegistry,
        *,
        sink: Sink,
        model: LocalModel | None = None,
        observers: Sequence[Observer] = (),
        quotas: TenantQuotas = NO_QUOTAS,
        queue_limit: int = QUEUE_LIMIT,
        harnesses: Mapping[str, Harness] = BUILTIN_HARNESSES,
        preloaded: Preloaded | None = None,
        retention: Retention | None = None,
    ) -> None:
        self._ctx = ctx
        self._retention = retention
        self._harnesses = harnesses
        self._queue_limit = queue_limit
        self._address = address
        self._tenant = parse_address(address).tenant
        self._quotas = quotas
        self._tools = tools
        self._sink = sink
        self._model = model
        self._observers = observers
        self._store = Store(ctx, preloaded)
        self._pipeline = Pipeline(definitions(tools))
        self._clock = Clock()
        self._lease = Lease()
        """What the wake holds of the tenant's tokens of the day (settled at its end)."""
        self._uncounted = False
        """The wake may start the first turn of an agent a message brought into being."""
        self._asked: tuple[str, Asked[SpecAnswer]] | None = None
        """A message naming its kind has its spec asked for before the record is read,
        so the tenant answers while the record is read: a round trip fewer before the
        turn starts."""

    async def run(self, wake: Wake) -> WakeResult:
        if isinstance(wake, Message) and wake.kind and wake.spec is None:
            self._asked = (wake.kind, self._ask_spec(wake.kind))
        started = self._ctx.run_typed(CLOCK_STEP, _now, step_options(float))
        record = await self._store.record(started)  # the clock is read with the record
        if self._store.new:  # nothing of an erased tenant is made again
            await refuse_if_erased(self._ctx, self._tenant)
        self._clock = self._clock.saw(await started)
        self._done = started
        self._timeline = Timeline(
            self._address, record.timeline, self._sink, self._store.write_chunk, self._observers
        )
        inputs: deque[Input] = deque([wake])
        # An agent a message (not a spawn) brought into being counts itself as its first
        # turn is driven, before it spawns (the tenant's object takes both in that order);
        # a spawned one was counted by its parent's spawn.
        self._uncounted = not record.turns and isinstance(wake, Message) and wake.parent is None
        reply, note = "", ""
        while inputs:
            reaction = react(self._address, record, inputs.popleft(), queue_limit=self._queue_limit)
            record = reaction.record
            reply = reaction.reply if reaction.reply is not None else reply
            note = reaction.note or note
            for effect in reaction.effects:
                follow = await self.perform(effect, record)
                if follow is not None:
                    inputs.append(follow)
        record = await self._finish(record)
        return WakeResult(
            status(self._address, record, record.timeline, running=False), reply, note
        )

    @overload
    async def perform(self, step: Effect, record: AgentRecord) -> Input | None: ...
    @overload
    async def perform(self, step: Command, record: AgentRecord) -> Result: ...

    async def perform(  # noqa: C901, PLR0911, PLR0912 - one case per effect and command
        self, step: Effect | Command, record: AgentRecord
    ) -> Input | Result | None:
        """Perform one of the machine's effects or one of the harness's commands (the
        latter only while `_drive` runs a turn, with `self._books` its bookkeeping)."""
        match step:
            case Emit(turn=turn, round=round_, bodies=bodies):
                self._timeline.add(turn, round_, *bodies)
            case SendWake(address=address, wake=wake, key=key, delay=delay):
                send(
                    self._ctx,
                    WAKE,
                    WakeEnvelope(wake),
                    key=address,
                    idempotency_key=key,
                    delay=delay,
                )
            case Remember(index=index, segment=segment):
                self._store.write_segment(index, segment)
            case FindSpec(message=message, kind=kind, direct=direct):
                return SpecFound(message, (await self._spec(kind)).spec, direct)
            case Drive(turn=turn, start=start):
                if start is not None:
                    refusal = await self._funding(turn, record)
                    if refusal is not None:
                        return Unfunded(start, refusal)
                    self._timeline.add(turn.number, 0, start.started)
                return await self._drive(turn, record)
            case RefuseWake(status=status_code, sentence=sentence):
                await self._finish(record)
                raise restate.TerminalError(sentence, status_code=status_code)
            case CallModel():
                return await self._call_model(step)
            case CallTool():
                return await self._call_tool(step)
            case Summarize(request=request):
                return await self._summarize(request)
            case RecordFold():
                self._books, folded = self._books.folded(step)
                self._add(folded)
            case Recall():
                return await self._recall(step)
            case Spawn():
                return await self._spawn(step, record)
            case HandOff(kind=kind):
                return await self._hand_off(kind)
            case Refuse(call=refused, reason=reason):
                self._refused(refused.id, refused.name, refused.arguments, reason)
            case AskApproval(request_id=request_id, call=asked, asked=questions, page=page):
                shown = questions.questions if questions is not None else {}
                called = (ToolCalled(asked.id, asked.name, asked.arguments),) if page else ()
                asking = ApprovalRequested(
                    request_id, asked.id, asked.name, asked.arguments, shown, page=page
                )
                self._add(*called, asking)
            case Told(call=told, content=content, status=told_status, shown=shown_already):
                finished = ToolFinished(told.id, told.name, told_status, content)
                called = () if shown_already else (ToolCalled(told.id, told.name, told.arguments),)
                self._add(*called, finished)
            case Wait(pending=pending):
                self._add(Waiting(pending))
            case Between():
                return await self._between()
        return Ack() if isinstance(step, Command) else None

    async def _with_memories(self, turn: TurnState) -> TurnState:
        """A turn that may search memory is shown, as it starts, the records most relevant
        to its message: one journaled step, so a replay shows the same ones."""
        if turn.round or turn.memories or SEARCH_MEMORY not in grants(turn.spec):
            return turn
        asked = next((m.content for m in turn.messages if m.role == "user"), "")
        found = await self._ctx.run_typed(
            "memories",
            self._tools.relevant,
            step_options(MemoryShown),
            self._address,
            asked,
            turn.user,
        )
        return msgspec.structs.replace(turn, memories=found.records)

    async def _between(self) -> Arrived | Ack:
        """A round ended: what rang the turn's bell during it, if anything."""
        answer, heard = await self._bell.between()
        self._add(*heard)
        return answer

    def _ask_spec(self, kind: str) -> Asked[SpecAnswer]:
        """Ask the tenant for the newest published spec of `kind`."""
        return ask(self._ctx, LATEST_SPEC, SpecQuery(kind), key=self._tenant)

    async def _spec(self, kind: str) -> SpecAnswer:
        """The answer to the question `run` asked, if it was about `kind`; else asked now."""
        asked, self._asked = self._asked, None
        return await (asked[1] if asked and asked[0] == kind else self._ask_spec(kind)).answer()

    async def _drive(self, turn: TurnState, record: AgentRecord) -> Input:
        """Run the harness until the turn pauses or ends; a stop (the invocation's
        cancellation) ends it as the books left it."""
        self._bell = Doorbell(self._ctx, self._store, self._done, turn.number)
        if self._quotas.agents and self._uncounted:
            self._uncounted = False
            send(self._ctx, COUNT_AGENT, Empty(), key=self._tenant)
        recent = await self._store.recent(record.context)
        self._catalog = await self._mcp_catalog(turn)
        network = turn.spec.workspace.network
        given_tools = definitions(self._tools, network=network)
        tools = (*given_tools, *(tool.definition for tool in self._catalog.tools))
        if self._catalog.tools:
            self._pipeline = Pipeline(tools)
        problems = self._catalog.problems
        turn = await self._with_memories(turn)
        given = TurnInput(self._address, turn, recent, tools, record.context, problems)
        self._books = Books(turn, record.ledger, record.context, self._clock.now)
        harness = start(self._harnesses, given)
        try:
            command = next(harness)
        except Exception as error:  # noqa: BLE001 - a pure harness raises again on a retry
            spent = self._books.spent(self._clock)
            return self._ran(spent, ("failed", broke(turn, error)), "turn")
        while True:
            try:
                result = await self.perform(command, record)
            except (restate.TerminalError, PolicyError) as error:
                harness.close()
                books = self._books
                if isinstance(error, restate.TerminalError) and error.status_code == CANCELLED:
                    spent = books.spent(self._clock)
                    return TurnStopped(spent, books.ledger, books.context, self._bell.steered)
                spent = books.spent(self._clock)
                return self._ran(spent, ("failed", reason(error)), failed_by(error))
            try:
                command = harness.send(result)
            except StopIteration as stop:
                await self._extract(stop.value, command)
                final = msgspec.structs.replace(stop.value, usage=self._books.turn.usage)
                failed: FailedBy = "turn" if isinstance(command, Fail) else ""
                return self._ran(self._books.spent(self._clock, final), ending(command), failed)
            except Exception as error:  # noqa: BLE001 - as above: the turn fails, not the wake
                turn = self._books.turn
                spent = self._books.spent(self._clock)
                return self._ran(spent, ("failed", broke(turn, error)), "turn")

    def _ran(
        self, turn: TurnState, ending: tuple[Outcome, str] | None, failed: FailedBy = ""
    ) -> TurnRan:
        books, bell = self._books, self._bell
        return TurnRan(turn, ending, books.ledger, books.context, bell.steered, bell.held, failed)

    async def _mcp_catalog(self, turn: TurnState) -> McpCatalog:
        """The tools of the MCP servers the spec grants, listed once per wake in one
        journaled step (so a replay shows the model the same tools). Whether the step is
        taken depends on the spec alone, which the journal holds."""
        names = tuple(name for name in grants(turn.spec) if name.startswith(MCP_PREFIX))
        if not names:
            return McpCatalog()
        tenant = parse_address(self._address).tenant
        hub = self._tools.mcp
        list_ = hub.catalog if hub is not None else _no_catalog
        return await self._ctx.run_typed(
            "mcp catalog", list_, step_options(McpCatalog), tenant, names
        )

    async def _read_clock(self) -> float:
        """The latest known time, reading the clock only if no step gave one yet."""
        if self._clock.now is None:
            at = await self._ctx.run_typed(CLOCK_STEP, _now, step_options(float))
            self._clock = self._clock.saw(at)
        assert self._clock.now is not None
        return self._clock.now

    def _saw(self, *times: float) -> None:
        self._clock = self._clock.saw(*times)
        if times[0]:
            self._timeline.stamp(times[0])  # events before the step take its start

    async def _call_model(self, command: CallModel) -> ModelReply:
        request = command.request
        books = self._books = self._books.at_round(request.round)
        limits = books.turn.spec.limits
        tokens = self._quotas.daily_tokens
        now = await self._read_clock() if tokens or needs_clock(limits) else 0.0
        active = books.active(self._clock)
        ledger = self._pipeline.before_model(books.turn, books.ledger, command, now, active)
        if tokens:
            await self._lease_for(day_of(now), estimate(command.request, command.prompt_chars))
        self._books = books.reserved(ledger)
        await self._flush()
        reply = await self._generate(request)
        self._saw(reply.started, reply.finished)
        self._count(reply)
        self._books = self._books.replied(reply).observed(command.prompt_chars, reply)
        self._add(*model_events(command, reply), at=reply.finished)
        self._timeline.show()
        return reply

    async def _summarize(self, request: ModelRequest) -> Summary:
        """The fold's summary step, journaled like a model step. Whatever goes wrong (an
        unknown model, a plugin that raises, a budget) is answered, never raised: the
        harness then folds with the extractive summary."""
        turn = self._books.turn
        request = msgspec.structs.replace(request, turn=turn.number, round=turn.round)
        try:
            reply = await self._generate(request)
        except restate.TerminalError as error:
            if error.status_code == CANCELLED:
                raise
            return Summary(problem=f"The summary step failed: {error.message}")
        self._saw(reply.started, reply.finished)
        self._count(reply)
        self._books = self._books.replied(reply)
        return Summary(reply)

    async def _extract(self, turn: TurnState, last: Command) -> None:
        """The spec's `memory.extract`: after the reply (`last`), one model step lists the facts
        worth keeping, and each is remembered in the turn's own scope (its end user's,
        else the agent's) through that scope's `Memory` object. The step and the writes
        are journaled, so a replay writes nothing twice; a step that fails keeps nothing
        and never fails the turn."""
        if not isinstance(last, Reply) or not turn.spec.memory.extract:
            return
        request = extraction_request(self._address, turn)
        scope = own_scope(self._address, turn.user)
        await self._flush()  # the reply is shown while the step runs
        try:
            reply = await self._generate(request)
        except restate.TerminalError as error:
            why = f"the extraction step failed: {error.message}"
            self._add(MemoriesExtracted((), scope.kind, request.model, why))
            return
        self._saw(reply.started, reply.finished)
        self._count(reply)
        self._books = self._books.replied(reply)
        kept = []
        for fact in facts(reply):
            note = MemoryNote(scope, "episodic", fact)
            answer = await call(self._ctx, REMEMBER, note, key=scope.key)
            if answer.record is not None:
                kept.append(answer.record.id)
        self._add(MemoriesExtracted(tuple(kept), scope.kind, reply.model or request.model))

    async def _funding(self, turn: TurnState, record: AgentRecord) -> str | None:
        """Why the turn may not start (`funding.py`), else None. The tenant is asked for
        tokens only when the wake holds none of the day."""
        tokens = self._quotas.daily_tokens
        if not tokens and not turn.spec.limits.max_daily_tokens:
            return None
        day = day_of(await self._read_clock())
        if (refusal := agent_refusal(turn.spec.limits, record.ledger, day)) is not None:
            return refusal
        if not tokens:
            return None
        await self._lease_for(day, opening_want(tokens))
        return tenant_refusal(self._tenant, tokens, self._lease)

    async def _lease_for(self, day: str, need: int) -> None:
        """Hold tokens of the tenant's day for a step estimated at `need`: asked only when
        what the wake holds does not cover it. A round whose wake is lent nothing goes on
        (its turn started funded) and what it uses is settled at the wake's end."""
        lease = self._lease
        limit = self._quotas.daily_tokens
        want = lease.wants(day, need, limit)
        if want:
            if lease.day and lease.day != day:
                self._settle()  # the day is over: what the wake held of it goes back
                lease = Lease()
            got = await call(self._ctx, LEASE_TOKENS, TokenLease(day, want), key=self._tenant)
            self._lease = lease.grown(got.day, got.tokens)

    def _count(self, reply: ModelReply) -> None:
        if self._quotas.daily_tokens:
            self._lease = self._lease.used(total(reply.usage))

    def _settle(self) -> None:
        """Tell the tenant what the wake was lent and what it used (one-way: a journaled
        send, so a replay never settles twice)."""
        lease, self._lease = self._lease, Lease()
        if lease.granted or lease.spent:
            settled = TokensSettled(lease.day, lease.granted, lease.spent)
            send(self._ctx, SETTLE_TOKENS, settled, key=self._tenant)

    async def _generate(self, request: ModelRequest) -> ModelReply:
        if self._model is None:
            return await call(self._ctx, GENERATE, request)
        return await self._model.step(self._ctx, request)

    async def _flush(self) -> None:
        """Flush before a round's model step (a round's long wait) and before a tool call
        that changes the world, so a person sees what is being done before it is done.
        Only the wake's first flush may read the clock, when no step has given the wake a
        time yet."""
        if self._timeline.pending:
            self._timeline.stamp(await self._read_clock())
            await self._timeline.flush("running", self._read_clock)

    async def _call_tool(self, command: CallTool) -> ToolResult:
        call_ = command.call
        books = self._books
        problem = self._pipeline.before_tool(books.turn, call_, books.active(self._clock))
        if problem is not None:
            self._refused(call_.id, call_.name, call_.arguments, problem)
            return ToolResult(call_.id, call_.name, "error", problem)
        if command.answer is None:  # a call sent again with an answer was shown already
            self._add(ToolCalled(call_.id, call_.name, call_.arguments))
        written: tuple[ArtifactWritten, ...] = ()
        if call_.name in WORKSPACE_TOOL_NAMES:
            await self._flush()  # a command changes the world: show it before it runs
            result, written = await self._workspace(command)
        elif (hub := self._tools.mcp) and (tool := self._found_mcp(call_.name)):
            if not tool.read_only:
                await self._flush()
            result = await self._ctx.run_typed(
                f"tool {call_.name} {call_.id}",
                self._traced(call_, hub.run),
                step_options(ToolResult),
                call_,
                command.idempotency_key,
                tool,
                command.answer,
            )
            written = kept(call_.id, result)
        else:
            if self._tools.has_effects(call_.name):
                await self._flush()
            result = await self._ctx.run_typed(
                f"tool {call_.name} {call_.id}",
                self._traced(call_, self._tools.run),
                step_options(ToolResult),
                call_,
                command.idempotency_key,
                self._address,
                books.turn.user,
                tenant_writes(books.turn),
            )
        self._clock = self._clock.saw(result.started, result.finished)
        if at := result.started or self._clock.now:
            self._timeline.stamp(at)
        if result.asked is None:  # else the call waits for a person: approval_requested
            finished = ToolFinished(call_.id, call_.name, result.status, result.content)
            self._add(finished, *written, at=result.finished or None)
        self._timeline.show()
        return result

    def _traced(self, call_: ToolCall, run: Callable[P, ToolResult]) -> Callable[P, ToolResult]:
        """The tool step's function in its span, under the attempt's (the step runs it on
        another thread)."""
        turn = self._books.turn
        attributes = genai.tool_call(call_, self._address, turn.number, turn.round)
        parent = tracing.attempt(self._ctx)
        return tracing.traced(f"execute_tool {call_.name}", parent, attributes, run)

    def _found_mcp(self, name: str) -> McpTool | None:
        return self._catalog.find(name) if name.startswith(MCP_PREFIX) else None

    async def _workspace(self, command: CallTool) -> tuple[ToolResult, tuple[ArtifactWritten, ...]]:
        """A workspace tool: a durable call to the execution plane, never a step here."""
        turn = self._books.turn
        settings = turn.spec.workspace
        lent_by = turn.parent.address if turn.parent and settings.lend_to_children else None
        request = WorkspaceCall(
            self._address, command.call, command.idempotency_key, settings, lent_by
        )
        reply = await call(self._ctx, WORKSPACE_CALL, request)
        call_id = command.call.id
        written = tuple(ArtifactWritten(call_id, a.path, a.size, a.sha256) for a in reply.artifacts)
        return reply.result, written

    async def _recall(self, command: Recall) -> ToolResult:
        call_ = command.call
        self._add(ToolCalled(call_.id, call_.name, call_.arguments))
        query = parse(call_)
        if isinstance(query, str):
            result = ToolResult(call_.id, call_.name, "error", query)
        else:
            found = await self._store.recalled(query, command, self._books.context)
            result = ToolResult(call_.id, call_.name, "ok", answer(query, found))
        self._add(ToolFinished(call_.id, call_.name, result.status, result.content))
        return result

    async def _spawn(self, command: Spawn, record: AgentRecord) -> Spawned:
        books = self._books
        problem = spawn_refusal(books.turn, command, books.spawns, books.lent)
        if problem is None and self._quotas.agents:
            problem = await self._take_agent()
        if problem:
            self._refused(command.call.id, command.call.name, command.call.arguments, problem)
            return Spawned(command.child, problem)
        self._books, turn = books.spawned(command.budget), books.turn
        attributes = genai.tool_call(command.call, self._address, turn.number, turn.round)
        span = await self._ctx.run_typed(
            f"spawn {command.child}",
            genai.spawned,
            step_options(SpanRef),
            parent=tracing.attempt(self._ctx),
            attributes={**attributes, "teaspill.child.agent": command.child},
        )
        linked = span if span.span_id else None
        parent = ParentRef(self._address, turn.number, command.call.id, linked)
        message = first_message(command, parent, turn)
        await self.perform(SendWake(command.child, message, key=f"spawn {command.child}"), record)
        spawned = ChildSpawned(command.call.id, command.child, command.task, command.kind)
        self._add(msgspec.structs.replace(spawned, stage=command.stage))
        return Spawned(command.child)

    async def _hand_off(self, kind: str) -> Handover:
        """The newest spec of `kind`, which the rest of the turn is checked against."""
        spec = (await self._spec(kind)).spec
        if spec is None:
            return Handover()
        books, turn = self._books, self._books.turn
        self._books = dataclasses.replace(books, turn=msgspec.structs.replace(turn, spec=spec))
        self._add(HandedOff(turn.spec.kind, kind, spec.version))
        return Handover(spec)

    async def _take_agent(self) -> str:
        """One agent more for a spawn, from the tenant's count; the sentence if refused."""
        try:
            await call(self._ctx, TAKE_AGENT, Empty(), key=self._tenant)
        except restate.TerminalError as error:
            if error.status_code != TOO_MANY:
                raise
            return error.message
        return ""

    def _refused(self, call_id: str, name: str, arguments: dict[str, object], why: str) -> None:
        self._add(
            ToolCalled(call_id, name, dict(arguments)), ToolFinished(call_id, name, "error", why)
        )

    def _add(self, *bodies: EventBody, at: float | None = None) -> None:
        turn = self._books.turn
        self._timeline.add(turn.number, turn.round, *bodies, at=at)

    async def _finish(self, record: AgentRecord) -> AgentRecord:
        """Flush what is left of the timeline and write the record (if it changed): the
        wake's end. Returns the record as written."""
        state = state_of(record.turn, paused=record.paused)
        self._settle()
        await self._timeline.flush(state, self._read_clock, last=True)
        mark = self._timeline.mark
        if self._retention is not None:  # the projection holds every event by now
            keep, put = self._retention
            mark = await self._store.retire(mark, keep, put)
        if record.timeline != mark:
            record = msgspec.structs.replace(record, timeline=mark)
        await self._store.finish(record)
        return record


def failed_by(error: restate.TerminalError | PolicyError) -> FailedBy:
    """A budget is the turn's own limit; anything else is a step that could not run."""
    return "turn" if isinstance(error, BudgetExceededError) else "step"


def broke(turn: TurnState, error: Exception) -> str:
    """The sentence for a harness that raised. A harness is pure, so it would raise again
    on every retry of the wake: the turn ends failed (the operator's log has the trace)
    instead of the wake failing for good in front of every message after it."""
    name = COMPOSITION_HARNESS if turn.spec.composition is not None else turn.spec.harness
    log.exception("The harness %s raised in turn %d", name, turn.number)
    return f"The harness {name!r} failed: {type(error).__name__}: {error}."


def reason(error: restate.TerminalError | PolicyError) -> str:
    if isinstance(error, PolicyError):
        return str(error)
    return f"The model step failed: {error.message}"


def _no_catalog(tenant: str, names: tuple[str, ...]) -> McpCatalog:
    return McpCatalog(problems=("This deployment has no MCP servers configured.",))


async def _now() -> float:
    return time.time()  # noqa: TID251 - inside the journaled step: replay reads it back
