"""One wake of one agent: start, continue and end turns; queue what arrives meanwhile."""

from __future__ import annotations

import msgspec
import restate

from schemas.chat import ChatMessage
from schemas.events import (
    AgentState,
    AgentStatus,
    ChildReported,
    MessageQueued,
    Outcome,
    TurnEnded,
    TurnStarted,
    WakeResult,
)
from schemas.harness import Command, Fail, Reply, TurnState, Wait
from schemas.spec import AgentSpec
from schemas.state import History, Queue, Summary
from schemas.wake import ChildFinished, Message, WakeEnvelope
from services.agent.driver import AGENT, Driver
from services.agent.specs import missing_spec, resolve_spec
from services.agent.timeline import Timeline, last_seq_of
from services.harness.loop import TurnInput, child_reported, is_pending, run_turn
from services.tools.registry import ToolRegistry

TURN = "turn"
HISTORY = "history"
QUEUE = "queue"
SUMMARY = "summary"


class AgentWake:
    def __init__(self, ctx: restate.ObjectContext, address: str, tools: ToolRegistry) -> None:
        self._ctx = ctx
        self._address = address
        self._tools = tools
        self._timeline = Timeline(ctx, address)
        self._reply = ""

    async def on_message(self, message: Message) -> WakeResult:
        turn = await self._ctx.get(TURN, type_hint=TurnState)
        if turn is not None:
            queue = await self._ctx.get(QUEUE, type_hint=Queue) or Queue()
            self._ctx.set(QUEUE, Queue((*queue.messages, message)))
            await self._timeline.append(turn.number, turn.round, MessageQueued(message.text))
        else:
            await self._run_from(message, direct=True)
        return await self._result()

    async def on_child(self, report: ChildFinished) -> WakeResult:
        turn = await self._ctx.get(TURN, type_hint=TurnState)
        event = ChildReported(report.call_id, report.child, report.outcome, report.reply)
        if turn is None or turn.number != report.turn or not is_pending(turn, report.child):
            await self._timeline.append(report.turn, 0, event)
            await self._remember_late(report)
            return await self._result()
        await self._timeline.append(turn.number, turn.round, event)
        turn = child_reported(turn, report)
        if turn.waiting and not turn.pending:
            next_message = await self._continue(turn)
            if next_message is not None:
                await self._run_from(next_message, direct=False)
        else:
            self._ctx.set(TURN, turn)
        return await self._result()

    async def _run_from(self, message: Message | None, *, direct: bool) -> None:
        """Run `message`'s turn, then each queued message's, until one waits.

        A message that names no spec the agent can find is refused: with status 404 when
        its sender is waiting for this wake (`direct`), else as a failed turn.
        """
        while message is not None:
            spec = await resolve_spec(self._ctx, self._address, message)
            if spec is None and direct:
                raise restate.TerminalError(missing_spec(self._address, message), 404)
            if spec is None:
                await self._refuse(message)
                message = await self._dequeue()
            else:
                message = await self._continue(await self._start(message, spec))
            direct = False

    async def _refuse(self, message: Message) -> None:
        """Record a turn that could not start, so its sender can read why."""
        turn = await self._start(message, AgentSpec(kind=message.kind or "", instructions=""))
        reason = missing_spec(self._address, message)
        await self._timeline.append(turn.number, 0, TurnEnded("failed", reason=reason))
        await self._end(turn, Fail(reason))

    async def _start(self, message: Message, spec: AgentSpec) -> TurnState:
        summary = await self._summary()
        number = summary.turns + 1
        self._ctx.set(SUMMARY, msgspec.structs.replace(summary, turns=number))
        parent = message.parent.address if message.parent else None
        started = TurnStarted(message.text, spec.kind, spec.version, parent)
        await self._timeline.append(number, 0, started)
        user = ChatMessage(role="user", content=message.text)
        turn = TurnState(number, spec, (user,), parent=message.parent, depth=message.depth)
        self._ctx.set(TURN, turn)
        return turn

    async def _continue(self, turn: TurnState) -> Message | None:
        """Drive the turn until it waits or ends; return the next queued message."""
        history = await self._ctx.get(HISTORY, type_hint=History) or History()
        given = TurnInput(self._address, turn, history.messages, self._tools.definitions())
        driver = Driver(self._ctx, self._address, self._timeline, self._tools)
        final, last = await driver.drive(run_turn(given), turn)
        if isinstance(last, Wait):
            self._ctx.set(TURN, final)
            return None
        await self._end(final, last)
        return await self._dequeue()

    async def _end(self, turn: TurnState, last: Command) -> None:
        outcome: Outcome = "succeeded" if isinstance(last, Reply) else "failed"
        text = (
            last.text if isinstance(last, Reply) else last.reason if isinstance(last, Fail) else ""
        )
        self._reply = text if outcome == "succeeded" else ""
        history = await self._ctx.get(HISTORY, type_hint=History) or History()
        self._ctx.set(HISTORY, History((*history.messages, *turn.messages)))
        self._ctx.clear(TURN)
        summary = await self._summary()
        self._ctx.set(SUMMARY, Summary(summary.turns, outcome, self._reply))
        if turn.parent is not None:
            report = ChildFinished(
                self._address, turn.parent.turn, turn.parent.call_id, outcome, text
            )
            self._ctx.generic_send(
                AGENT,
                "wake",
                msgspec.json.encode(WakeEnvelope(report)),
                key=turn.parent.address,
                idempotency_key=f"finished {self._address} {turn.number}",
            )

    async def _dequeue(self) -> Message | None:
        queue = await self._ctx.get(QUEUE, type_hint=Queue) or Queue()
        if not queue.messages:
            return None
        self._ctx.set(QUEUE, Queue(queue.messages[1:]))
        return queue.messages[0]

    async def _remember_late(self, report: ChildFinished) -> None:
        """A report for a turn that already ended goes into the history for the next one."""
        history = await self._ctx.get(HISTORY, type_hint=History) or History()
        note = ChatMessage(
            role="user",
            content=f"(Helper {report.child} finished later ({report.outcome}): {report.reply})",
        )
        self._ctx.set(HISTORY, History((*history.messages, note)))

    async def _summary(self) -> Summary:
        return await self._ctx.get(SUMMARY, type_hint=Summary) or Summary()

    async def _result(self) -> WakeResult:
        return WakeResult(await status(self._ctx, self._address), self._reply)


async def status(
    ctx: restate.ObjectSharedContext | restate.ObjectContext, address: str
) -> AgentStatus:
    turn = await ctx.get(TURN, type_hint=TurnState)
    summary = await ctx.get(SUMMARY, type_hint=Summary) or Summary()
    queue = await ctx.get(QUEUE, type_hint=Queue) or Queue()
    last_seq = await last_seq_of(ctx)
    state: AgentState = "idle" if turn is None else "waiting" if turn.waiting else "running"
    return AgentStatus(
        address=address,
        state=state,
        turn=summary.turns,
        last_seq=last_seq,
        last_outcome=summary.last_outcome,
        queued=len(queue.messages),
    )
