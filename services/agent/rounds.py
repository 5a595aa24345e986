"""Drives the harness: turns its commands into journaled steps and timeline events.

Every model and tool call crosses the policy pipeline first. The model step runs as a
local journaled step when the model is served by this process (`LocalModel`), else as a
durable call to the `Model` service. Tool steps are `ctx.run` steps keyed by agent, turn,
round and call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

import msgspec
import restate

from schemas.chat import ChatMessage, ToolDefinition
from schemas.events import (
    ApprovalRequested,
    ChildSpawned,
    ContextFolded,
    EventBody,
    ModelFallback,
    ModelMessage,
    Outcome,
    ToolCalled,
    ToolFinished,
    Waiting,
)
from schemas.harness import (
    Ack,
    AskApproval,
    CallModel,
    CallTool,
    Command,
    Fail,
    Recall,
    RecordFold,
    Refuse,
    Reply,
    Result,
    Spawn,
    Spawned,
    Summarize,
    Summary,
    ToolResult,
    TurnState,
    Wait,
)
from schemas.model import ModelReply, ModelRequest, Usage
from schemas.state import Ledger
from schemas.wake import Message, ParentRef, WakeEnvelope
from schemas.workspace import WORKSPACE_TOOLS
from services.agent.clock import Clock
from services.agent.machine import TurnRan
from services.agent.pipeline import BudgetExceededError, Pipeline, after_model, needs_clock
from services.agent.store import Store
from services.agent.timeline import Timeline
from services.agent.workspace import call_workspace, is_workspace_tool
from services.contracts import GENERATE, WAKE
from services.durable import CANCELLED, call, send, step_options
from services.harness.context import observed
from services.harness.loop import TurnInput, run_turn
from services.harness.recall import MATCHES, SEARCH_SEGMENTS, RecallQuery, answer, matches, parse
from services.tools.registry import ToolRegistry


class LocalModel(Protocol):
    """A model served by this process: the composition root hands it in when both planes
    share one deployment, so a model step costs local journaled steps of the wake, not an
    invocation."""

    def step(self, ctx: restate.Context, request: ModelRequest) -> Awaitable[ModelReply]: ...


def definitions(tools: ToolRegistry) -> tuple[ToolDefinition, ...]:
    """Every tool a spec may grant: the registry's and the workspace tools."""
    return (*tools.definitions(), *WORKSPACE_TOOLS)


def add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.cached_tokens + b.cached_tokens,
    )


class Rounds:
    def __init__(
        self,
        ctx: restate.ObjectContext,
        address: str,
        *,
        timeline: Timeline,
        store: Store,
        clock: Clock,
        tools: ToolRegistry,
        model: LocalModel | None,
    ) -> None:
        self._ctx = ctx
        self._address = address
        self._timeline = timeline
        self._store = store
        self._clock = clock
        self._tools = tools
        self._model = model
        self._pipeline = Pipeline(definitions(tools))

    async def drive(self, turn: TurnState, given: TurnInput, ledger: Ledger) -> TurnRan:
        """Run the harness until the turn pauses or ends.

        `self.turn` and `self.ledger` follow the turn as it goes, so a caller that is
        interrupted (a stop raises the cancellation out of here) knows how far it got.
        """
        self.turn, self.ledger, self.context = turn, ledger, given.context
        self._since = self._clock.now
        harness = run_turn(given)
        command = next(harness)
        while True:
            try:
                result = await self._perform(command)
            except (restate.TerminalError, BudgetExceededError) as error:
                if isinstance(error, restate.TerminalError) and error.status_code == CANCELLED:
                    raise
                harness.close()
                failed: tuple[Outcome, str] = ("failed", _reason(error))
                return TurnRan(self._spent(self.turn), failed, self.ledger, self.context)
            try:
                command = harness.send(result)
            except StopIteration as stop:
                final = msgspec.structs.replace(stop.value, usage=self.turn.usage)
                return TurnRan(self._spent(final), _ending(command), self.ledger, self.context)

    def stopped(self) -> TurnState:
        return self._spent(self.turn)

    def _spent(self, turn: TurnState) -> TurnState:
        return msgspec.structs.replace(turn, active_seconds=self._active())

    def _active(self) -> float:
        since = self._since if self._since is not None else self._clock.first
        now = self._clock.now
        extra = now - since if now is not None and since is not None else 0.0
        return self.turn.active_seconds + extra

    async def _perform(self, command: Command) -> Result:
        match command:
            case CallModel():
                return await self._call_model(command)
            case CallTool():
                return await self._call_tool(command)
            case Summarize(request=request):
                return await self._summarize(request)
            case RecordFold():
                self._record_fold(command)
            case Recall():
                return await self._recall(command)
            case Spawn():
                return self._spawn(command)
            case Refuse(call=call, reason=reason):
                self._refused(call.id, call.name, call.arguments, reason)
            case AskApproval(request_id=request_id, call=call):
                self._add(ApprovalRequested(request_id, call.id, call.name, call.arguments))
            case Wait(pending=pending):
                self._add(Waiting(pending))
        return Ack()

    async def _call_model(self, command: CallModel) -> ModelReply:
        request = command.request
        self.turn = msgspec.structs.replace(self.turn, round=request.round)
        now = await self._clock.read() if needs_clock(self.turn.spec.limits) else 0.0
        self.ledger = self._pipeline.before_model(
            self.turn, self.ledger, command, now, self._active()
        )
        await self._flush()
        reply = await self._generate(request)
        self._clock.saw(reply.started, reply.finished)
        self._timeline.stamp(reply.started)
        self.turn = msgspec.structs.replace(self.turn, usage=add(self.turn.usage, reply.usage))
        self.context = observed(self.context, command.prompt_chars, reply)
        message = reply.message
        fallbacks = (ModelFallback(f.model, f.next, f.reason) for f in reply.fallbacks)
        body = ModelMessage(
            reply.model or request.model,
            message.content,
            message.tool_calls,
            reply.usage,
            reply.timing,
            fingerprint=command.fingerprint,
            folds_fingerprint=command.folds_fingerprint,
        )
        self._add(*fallbacks, body, at=reply.finished)
        self._timeline.show()
        self.ledger = after_model(self.ledger, reply.usage, reply.finished)
        return reply

    async def _summarize(self, request: ModelRequest) -> Summary:
        """The fold's summary step, journaled like a model step. Whatever goes wrong (an
        unknown model, a plugin that raises, a budget) is answered, never raised: the
        harness then folds with the extractive summary."""
        request = msgspec.structs.replace(request, turn=self.turn.number, round=self.turn.round)
        try:
            reply = await self._generate(request)
        except restate.TerminalError as error:
            if error.status_code == CANCELLED:
                raise
            return Summary(problem=f"The summary step failed: {error.message}")
        self._clock.saw(reply.started, reply.finished)
        self._timeline.stamp(reply.started)
        self.turn = msgspec.structs.replace(self.turn, usage=add(self.turn.usage, reply.usage))
        self.ledger = after_model(self.ledger, reply.usage, reply.finished)
        return Summary(reply)

    def _record_fold(self, command: RecordFold) -> None:
        block = command.block
        self.context = msgspec.structs.replace(
            command.context,
            window=self.context.window,
            prompt_tokens=self.context.prompt_tokens,
            prompt_chars=self.context.prompt_chars,
        )
        extractive = not command.model
        self._add(
            ContextFolded(
                block.first_turn,
                block.last_turn,
                block.summary,
                command.tokens_before,
                command.tokens_after,
                command.model,
                extractive,
                command.reason,
            )
        )

    async def _recall(self, command: Recall) -> ToolResult:
        call_ = command.call
        self._add(ToolCalled(call_.id, call_.name, call_.arguments))
        query = parse(call_)
        if isinstance(query, str):
            result = ToolResult(call_.id, call_.name, "error", query)
        else:
            content = answer(query, await self._recalled(query, command))
            result = ToolResult(call_.id, call_.name, "ok", content)
        self._add(ToolFinished(call_.id, call_.name, result.status, result.content))
        return result

    async def _recalled(
        self, query: RecallQuery, command: Recall
    ) -> list[tuple[int, tuple[ChatMessage, ...]]]:
        """(turn, messages) read back: one turn by number, or the newest that match."""
        store = self._store
        if query.turn is not None:
            if query.turn == command.turn:
                return [(command.turn, command.current)]
            segments = await store.of_turn(query.turn, self.context)
            messages = tuple(m for s in segments for m in s.messages)
            return [(query.turn, messages)] if messages else []
        found: dict[int, tuple[ChatMessage, ...]] = {}
        if matches(command.current, query.query):
            found[command.turn] = command.current
        last = self.context.segments - 1
        for index in range(last, max(last - SEARCH_SEGMENTS, -1), -1):
            if len(found) >= MATCHES:
                break
            segment = await store.segment(index)
            if segment is not None and matches(segment.messages, query.query):
                found[segment.turn] = (*segment.messages, *found.get(segment.turn, ()))
        return sorted(found.items())

    async def _generate(self, request: ModelRequest) -> ModelReply:
        if self._model is None:
            return await call(self._ctx, GENERATE, request)
        return await self._model.step(self._ctx, request)

    async def _flush(self) -> None:
        """Flush before a round's model step (a round's long wait) and before a tool call
        that changes the world, so a person sees what is being done before it is done
        (`Timeline.flush`: shown to the projection in this process, or else written and
        sent). Only the wake's first flush may read the clock, when no step has given the
        wake a time yet."""
        if self._timeline.pending:
            self._timeline.stamp(await self._clock.read())
            await self._timeline.flush("running", self._clock.read)

    async def _call_tool(self, command: CallTool) -> ToolResult:
        call_ = command.call
        problem = self._pipeline.before_tool(self.turn, call_, self._active())
        if problem is not None:
            self._refused(call_.id, call_.name, call_.arguments, problem)
            return ToolResult(call_.id, call_.name, "error", problem)
        self._add(ToolCalled(call_.id, call_.name, call_.arguments))
        if is_workspace_tool(call_.name):
            await self._flush()  # a command changes the world: show it before it runs
            reply, written = await call_workspace(self._ctx, self._address, self.turn, command)
            result = reply.result
        else:
            if self._tools.has_effects(call_.name):
                await self._flush()
            written = ()
            result = await self._ctx.run_typed(
                f"tool {call_.name} {call_.id}",
                self._tools.run,
                step_options(ToolResult),
                call_,
                command.idempotency_key,
                self._address,
            )
        self._clock.saw(result.started, result.finished)
        if at := result.started or self._clock.now:
            self._timeline.stamp(at)
        finished = ToolFinished(call_.id, call_.name, result.status, result.content)
        self._add(finished, *written, at=result.finished or None)
        self._timeline.show()
        return result

    def _spawn(self, command: Spawn) -> Spawned:
        parent = ParentRef(self._address, self.turn.number, command.call.id)
        message = Message(command.task, spec=command.spec, parent=parent, depth=command.depth)
        send(
            self._ctx,
            WAKE,
            WakeEnvelope(message),
            key=command.child,
            idempotency_key=f"spawn {command.child}",
        )
        self._add(ChildSpawned(command.call.id, command.child, command.task))
        return Spawned(command.child)

    def _refused(self, call_id: str, name: str, arguments: dict[str, object], why: str) -> None:
        self._add(
            ToolCalled(call_id, name, dict(arguments)), ToolFinished(call_id, name, "error", why)
        )

    def _add(self, *bodies: EventBody, at: float | None = None) -> None:
        self._timeline.add(self.turn.number, self.turn.round, *bodies, at=at)


def _ending(last: Command) -> tuple[Outcome, str] | None:
    if isinstance(last, Reply):
        return "succeeded", last.text
    if isinstance(last, Fail):
        return "failed", last.reason
    return None


def _reason(error: restate.TerminalError | BudgetExceededError) -> str:
    if isinstance(error, BudgetExceededError):
        return str(error)
    return f"The model step failed: {error.message}"
