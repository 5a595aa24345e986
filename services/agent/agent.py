"""One wake of one agent: start, continue and end turns; queue what arrives meanwhile."""

from __future__ import annotations

import msgspec
import restate

from schemas.chat import ChatMessage
from schemas.events import (
    ChildReported,
    MessageQueued,
    Outcome,
    TurnEnded,
    TurnStarted,
    WakeResult,
)
from schemas.harness import AskApproval, Command, Fail, Reply, TurnState, Wait
from schemas.spec import AgentSpec
from schemas.state import History, Queue, Summary
from schemas.wake import ChildFinished, Message, Timer
from schemas.workspace import WORKSPACE_TOOLS
from services.agent.driver import CANCELLED, Driver
from services.agent.observers import Observer
from services.agent.pipeline import Pipeline
from services.agent.specs import missing_spec, resolve_spec
from services.agent.state import HISTORY, QUEUE, RUNNING, SUMMARY, TURN, send_wake, status
from services.agent.timeline import Timeline
from services.harness.loop import TurnInput, child_reported, is_pending, run_turn
from services.tools.registry import ToolRegistry

STOPPED = "Stopped on request."


class AgentWake:
    def __init__(
        self,
        ctx: restate.ObjectContext,
        address: str,
        tools: ToolRegistry,
        observers: list[Observer],
    ) -> None:
        self._ctx = ctx
        self._address = address
        self._tools = tools
        self.timeline = Timeline(ctx, address, observers)
        self._reply = ""
        self._note = ""

    async def on_message(self, message: Message) -> WakeResult:
        turn = await self.turn()
        if turn is not None and turn.approval is not None:
            await self.end_superseded(turn)
            await self._run_from(message, direct=True)
        elif turn is not None:
            queue = await self._ctx.get(QUEUE, type_hint=Queue) or Queue()
            self._ctx.set(QUEUE, Queue((*queue.messages, message)))
            await self.timeline.append(turn.number, turn.round, MessageQueued(message.text))
        else:
            await self._run_from(message, direct=True)
        return await self.result()

    async def on_child(self, report: ChildFinished) -> WakeResult:
        turn = await self.turn()
        event = ChildReported(report.call_id, report.child, report.outcome, report.reply)
        if turn is None or turn.number != report.turn or not is_pending(turn, report.child):
            await self.timeline.append(report.turn, 0, event)
            await self._remember_late(report)
            return await self.result()
        await self.timeline.append(turn.number, turn.round, event)
        turn = child_reported(turn, report)
        if turn.waiting and not turn.pending and turn.approval is None:
            await self.resume(turn)
        else:
            self._ctx.set(TURN, turn)
        return await self.result()

    async def on_dequeue(self) -> WakeResult:
        """Start the next queued message, unless a turn is in progress."""
        if await self.turn() is None:
            await self._run_from(await self._dequeue(), direct=False)
        return await self.result()

    async def resume(self, turn: TurnState) -> None:
        """Continue a turn that was waiting, then run what queued behind it."""
        next_message = await self._continue(turn)
        if next_message is not None:
            await self._run_from(next_message, direct=False)

    async def turn(self) -> TurnState | None:
        return await self._ctx.get(TURN, type_hint=TurnState)

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
        await self.timeline.append(turn.number, 0, TurnEnded("failed", reason=reason))
        await self.end(turn, "failed", reason)

    async def _start(self, message: Message, spec: AgentSpec) -> TurnState:
        summary = await self._summary()
        number = summary.turns + 1
        self._ctx.set(SUMMARY, msgspec.structs.replace(summary, turns=number))
        parent = message.parent.address if message.parent else None
        started = TurnStarted(message.text, spec.kind, spec.version, parent)
        await self.timeline.append(number, 0, started)
        user = ChatMessage(role="user", content=message.text)
        turn = TurnState(number, spec, (user,), parent=message.parent, depth=message.depth)
        self._ctx.set(TURN, turn)
        return turn

    async def _continue(self, turn: TurnState) -> Message | None:
        """Drive the turn until it waits or ends; return the next queued message."""
        wake_started = await self._ctx.time()
        history = await self._ctx.get(HISTORY, type_hint=History) or History()
        definitions = (*self._tools.definitions(), *WORKSPACE_TOOLS)
        given = TurnInput(self._address, turn, history.messages, definitions)
        pipeline = Pipeline(self._ctx, definitions, wake_started)
        driver = Driver(self._ctx, self._address, self.timeline, self._tools, pipeline)
        self._ctx.set(RUNNING, self._ctx.request().id)
        try:
            final, last = await driver.drive(run_turn(given), turn)
        except restate.TerminalError as error:
            if error.status_code != CANCELLED:
                raise
            await self._stopped(turn, driver)
            return None
        finally:
            self._ctx.clear(RUNNING)
        if isinstance(last, Wait | AskApproval):
            spent = final.active_seconds + await self._ctx.time() - wake_started
            self._ctx.set(TURN, msgspec.structs.replace(final, active_seconds=spent))
            return None
        await self.end(final, *_ending(last))
        return await self._dequeue()

    async def _stopped(self, turn: TurnState, driver: Driver) -> None:
        """The wake in progress was cancelled: record the stop, and let a new wake run
        what queued behind it (this invocation is cancelled, so it does no more work)."""
        ended = TurnEnded("stopped", reason=STOPPED, usage=driver.usage)
        await self.timeline.append(turn.number, driver.round, ended)
        await self.end(msgspec.structs.replace(turn, usage=driver.usage), "stopped", STOPPED)
        queue = await self._ctx.get(QUEUE, type_hint=Queue) or Queue()
        if queue.messages:
            self.send_self(Timer("dequeue"))

    async def stop_waiting(self, turn: TurnState) -> None:
        """Stop a turn that waits (for children or an approval) or is parked."""
        await self.abandon(turn)
        ended = TurnEnded("stopped", reason=STOPPED, usage=turn.usage)
        await self.timeline.append(turn.number, turn.round, ended)
        await self.end(turn, "stopped", STOPPED)
        await self._run_from(await self._dequeue(), direct=False)

    async def end_superseded(self, turn: TurnState) -> None:
        await self.abandon(turn)
        reason = "A newer message superseded this turn while it waited for an answer."
        ended = TurnEnded("superseded", reason=reason, usage=turn.usage)
        await self.timeline.append(turn.number, turn.round, ended)
        await self.end(turn, "superseded", reason)

    async def abandon(self, turn: TurnState) -> None:
        """Hook for the approval module: record what the turn leaves unanswered."""

    async def end(self, turn: TurnState, outcome: Outcome, text: str) -> None:
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
            key = f"finished {self._address} {turn.number}"
            send_wake(self._ctx, turn.parent.address, report, key=key)

    def send_self(self, wake: Timer) -> None:
        send_wake(self._ctx, self._address, wake)

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

    def note(self, text: str) -> None:
        self._note = text

    async def result(self) -> WakeResult:
        return WakeResult(await status(self._ctx, self._address), self._reply, self._note)


def _ending(last: Command) -> tuple[Outcome, str]:
    if isinstance(last, Reply):
        return "succeeded", last.text
    assert isinstance(last, Fail)
    return "failed", last.reason
