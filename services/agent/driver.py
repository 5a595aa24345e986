"""The driver: turns the harness's commands into durable steps and timeline events.

This is the only code that touches the Restate context on the agent's behalf. Every model
and tool call crosses the policy pipeline first.
"""

from __future__ import annotations

from datetime import timedelta

import msgspec
import restate

from schemas.events import (
    ApprovalRequested,
    ArtifactWritten,
    ChildSpawned,
    Event,
    EventBody,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    Waiting,
)
from schemas.harness import (
    Ack,
    AskApproval,
    CallModel,
    CallTool,
    Command,
    Fail,
    Refuse,
    Reply,
    Result,
    Spawn,
    Spawned,
    ToolResult,
    TurnState,
    Wait,
)
from schemas.model import ModelReply, Usage
from schemas.wake import Message, ParentRef, Timer
from services.agent.pipeline import BudgetExceededError, Pipeline
from services.agent.state import send_wake
from services.agent.timeline import Timeline
from services.agent.workspace import call_workspace, is_workspace_tool
from services.harness.loop import Turn
from services.tools.registry import ToolRegistry

MODEL = "Model"
CANCELLED = 409
"""The status of the TerminalError Restate raises in a cancelled invocation."""


def add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.cached_tokens + b.cached_tokens,
    )


class Driver:
    def __init__(
        self,
        ctx: restate.ObjectContext,
        address: str,
        timeline: Timeline,
        tools: ToolRegistry,
        pipeline: Pipeline,
    ) -> None:
        self._ctx = ctx
        self._address = address
        self._timeline = timeline
        self._tools = tools
        self._pipeline = pipeline
        self.round = 0
        self.usage = Usage()

    async def drive(self, turn: Turn, state: TurnState) -> tuple[TurnState, Command]:
        """Run the harness to the end of this wake; return its state and last command.

        `round` and `usage` follow the turn as it goes, so a caller that is interrupted
        (a stop) still knows how far it got.
        """
        self._state, self.round, self.usage = state, state.round, state.usage
        command = next(turn)
        while True:
            try:
                result = await self._perform(command)
            except (restate.TerminalError, BudgetExceededError) as error:
                if isinstance(error, restate.TerminalError) and error.status_code == CANCELLED:
                    raise
                turn.close()
                command = Fail(_reason(error))
                await self._perform(command)
                return msgspec.structs.replace(state, usage=self.usage), command
            try:
                command = turn.send(result)
            except StopIteration as stop:
                final: TurnState = stop.value
                return msgspec.structs.replace(final, usage=self.usage), command

    async def _perform(self, command: Command) -> Result:
        match command:
            case CallModel():
                return await self._call_model(command)
            case CallTool():
                return await self._call_tool(command)
            case Spawn():
                return await self._spawn(command)
            case Refuse(call=call, reason=reason):
                await self._refused(call.id, call.name, call.arguments, reason)
            case AskApproval():
                await self._ask(command)
            case Wait(pending=pending):
                await self._record(Waiting(pending))
            case Reply(text=text):
                await self._record(TurnEnded("succeeded", reply=text, usage=self.usage))
            case Fail(reason=reason):
                await self._record(TurnEnded("failed", reason=reason, usage=self.usage))
        return Ack()

    async def _call_model(self, command: CallModel) -> ModelReply:
        request = command.request
        self.round = request.round
        await self._pipeline.before_model(self._with_usage(), request)
        raw = await self._ctx.generic_call(MODEL, "generate", msgspec.json.encode(request))
        reply = msgspec.json.decode(raw, type=ModelReply)
        self.usage = add(self.usage, reply.usage)
        message = reply.message
        recorded = await self._record(
            ModelMessage(request.model, message.content, message.tool_calls, reply.usage)
        )
        await self._pipeline.after_model(reply.usage, recorded[0].at.timestamp())
        return reply

    async def _call_tool(self, command: CallTool) -> ToolResult:
        call = command.call
        problem = await self._pipeline.before_tool(self._with_usage(), call)
        if problem is not None:
            await self._refused(call.id, call.name, call.arguments, problem)
            return ToolResult(call.id, call.name, "error", problem)
        await self._record(ToolCalled(call.id, call.name, call.arguments))
        written: tuple[ArtifactWritten, ...] = ()
        if is_workspace_tool(call.name):
            reply, written = await call_workspace(self._ctx, self._address, self._state, command)
            result = reply.result
        else:
            result = await self._ctx.run_typed(
                f"tool {call.name} {call.id}",
                self._tools.run,
                restate.RunOptions(type_hint=ToolResult),
                call,
                command.idempotency_key,
                self._address,
            )
        await self._record(
            ToolFinished(call.id, call.name, result.status, result.content), *written
        )
        return result

    async def _spawn(self, command: Spawn) -> Spawned:
        parent = ParentRef(self._address, self._state.number, command.call.id)
        message = Message(command.task, spec=command.spec, parent=parent, depth=command.depth)
        send_wake(self._ctx, command.child, message, key=f"spawn {command.child}")
        await self._record(ChildSpawned(command.call.id, command.child, command.task))
        return Spawned(command.child)

    async def _ask(self, command: AskApproval) -> None:
        call = command.call
        await self._record(
            ApprovalRequested(command.request_id, call.id, call.name, call.arguments)
        )
        timeout = timedelta(seconds=self._state.spec.limits.approval_timeout)
        timer = Timer("park", turn=self._state.number)
        send_wake(self._ctx, self._address, timer, delay=timeout)

    async def _refused(
        self, call_id: str, name: str, arguments: dict[str, object], why: str
    ) -> None:
        await self._record(
            ToolCalled(call_id, name, dict(arguments)), ToolFinished(call_id, name, "error", why)
        )

    def _with_usage(self) -> TurnState:
        return msgspec.structs.replace(self._state, usage=self.usage)

    async def _record(self, *bodies: EventBody) -> list[Event]:
        return await self._timeline.append(self._state.number, self.round, *bodies)


def _reason(error: restate.TerminalError | BudgetExceededError) -> str:
    if isinstance(error, BudgetExceededError):
        return str(error)
    return f"The model step failed: {error.message}"
