"""The driver: turns the harness's commands into durable steps and timeline events.

This is the only code that touches the Restate context on the agent's behalf.
"""

from __future__ import annotations

import msgspec
import restate

from schemas.events import (
    ChildSpawned,
    EventBody,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    Waiting,
)
from schemas.harness import (
    Ack,
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
from schemas.model import ModelReply
from schemas.wake import Message, ParentRef, WakeEnvelope
from services.agent.timeline import Timeline
from services.harness.loop import Turn
from services.tools.registry import ToolRegistry

AGENT = "Agent"
MODEL = "Model"


class Driver:
    def __init__(
        self, ctx: restate.ObjectContext, address: str, timeline: Timeline, tools: ToolRegistry
    ) -> None:
        self._ctx = ctx
        self._address = address
        self._timeline = timeline
        self._tools = tools

    async def drive(self, turn: Turn, state: TurnState) -> tuple[TurnState, Command]:
        """Run the harness to the end of this wake; return its state and last command."""
        self._number, self._round = state.number, state.round
        command = next(turn)
        while True:
            try:
                result = await self._perform(command, state)
            except restate.TerminalError as error:
                turn.close()
                command = Fail(f"The model step failed: {error.message}")
                await self._perform(command, state)
                return state, command
            try:
                command = turn.send(result)
            except StopIteration as stop:
                final: TurnState = stop.value
                return final, command

    async def _perform(self, command: Command, state: TurnState) -> Result:
        match command:
            case CallModel():
                return await self._call_model(command)
            case CallTool():
                return await self._call_tool(command)
            case Spawn():
                return await self._spawn(command, state)
            case Refuse(call=call, reason=reason):
                await self._record(
                    ToolCalled(call.id, call.name, call.arguments),
                    ToolFinished(call.id, call.name, "error", reason),
                )
            case Wait(pending=pending):
                await self._record(Waiting(pending))
            case Reply(text=text):
                await self._record(TurnEnded("succeeded", reply=text))
            case Fail(reason=reason):
                await self._record(TurnEnded("failed", reason=reason))
        return Ack()

    async def _call_model(self, command: CallModel) -> ModelReply:
        self._round += 1
        request = command.request
        raw = await self._ctx.generic_call(MODEL, "generate", msgspec.json.encode(request))
        reply = msgspec.json.decode(raw, type=ModelReply)
        message = reply.message
        await self._record(
            ModelMessage(request.model, message.content, message.tool_calls, reply.usage)
        )
        return reply

    async def _call_tool(self, command: CallTool) -> ToolResult:
        call = command.call
        await self._record(ToolCalled(call.id, call.name, call.arguments))
        result = await self._ctx.run_typed(
            f"tool {call.name} {call.id}",
            self._tools.run,
            restate.RunOptions(type_hint=ToolResult),
            call,
            command.idempotency_key,
            self._address,
        )
        await self._record(ToolFinished(call.id, call.name, result.status, result.content))
        return result

    async def _spawn(self, command: Spawn, state: TurnState) -> Spawned:
        parent = ParentRef(self._address, state.number, command.call.id)
        message = Message(command.task, spec=state.spec, parent=parent, depth=command.depth)
        self._ctx.generic_send(
            AGENT,
            "wake",
            msgspec.json.encode(WakeEnvelope(message)),
            key=command.child,
            idempotency_key=f"spawn {command.child}",
        )
        await self._record(ChildSpawned(command.call.id, command.child, command.task))
        return Spawned(command.child)

    async def _record(self, *bodies: EventBody) -> None:
        await self._timeline.append(self._number, self._round, *bodies)
