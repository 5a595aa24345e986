"""Turn control: approvals that park and resume, supersede, and stop."""

from __future__ import annotations

import msgspec
import restate

from schemas.events import ApprovalAbandoned, ApprovalAnswered, TurnParked, WakeResult
from schemas.harness import TurnState
from schemas.state import Answered
from schemas.wake import Approval, Stop, Timer
from services.agent.agent import AgentWake
from services.agent.state import ANSWERED, TURN

KEEP_ANSWERED = 100


class ControlledWake(AgentWake):
    async def on_approval(self, answer: Approval) -> WakeResult:
        """Run or refuse the call a person answered; the turn goes on where it paused."""
        turn = await self.turn()
        approval = turn.approval if turn is not None else None
        if turn is None or approval is None or approval.request_id != answer.request_id:
            raise await self._no_such_request(answer.request_id)
        await self.timeline.append(
            turn.number,
            turn.round,
            ApprovalAnswered(answer.request_id, answer.approve, answer.note, answer.by),
        )
        await self._remember_answer(answer.request_id)
        answered = msgspec.structs.replace(approval, answer=answer.approve, note=answer.note)
        await self.resume(msgspec.structs.replace(turn, approval=answered))
        return await self.result()

    async def on_timer(self, timer: Timer) -> WakeResult:
        if timer.name == "dequeue":
            return await self.on_dequeue()
        turn = await self.turn()
        if timer.name == "park" and turn is not None and turn.number == timer.turn:
            await self._park(turn)
        return await self.result()

    async def on_stop(self, stop: Stop) -> WakeResult:
        """Stop a turn that waits or is parked. (A running turn is stopped by cancelling
        its invocation: see the `stop` handler.)"""
        turn = await self.turn()
        if turn is None:
            self.note("The agent has no turn in progress; there is nothing to stop.")
        else:
            await self.stop_waiting(turn)
        return await self.result()

    async def abandon(self, turn: TurnState) -> None:
        if turn.approval is not None:
            abandoned = ApprovalAbandoned(turn.approval.request_id)
            await self.timeline.append(turn.number, turn.round, abandoned)
            await self._remember_answer(turn.approval.request_id)

    async def _park(self, turn: TurnState) -> None:
        if turn.approval is None or turn.approval.answer is not None or turn.parked:
            return
        await self.timeline.append(turn.number, turn.round, TurnParked(turn.approval.request_id))
        self._ctx.set(TURN, msgspec.structs.replace(turn, parked=True))

    async def _remember_answer(self, request_id: str) -> None:
        answered = await self._ctx.get(ANSWERED, type_hint=Answered) or Answered()
        kept = (*answered.requests, request_id)[-KEEP_ANSWERED:]
        self._ctx.set(ANSWERED, Answered(kept))

    async def _no_such_request(self, request_id: str) -> restate.TerminalError:
        answered = await self._ctx.get(ANSWERED, type_hint=Answered) or Answered()
        if request_id in answered.requests:
            return restate.TerminalError(
                f"Approval request {request_id!r} was already answered (or its turn ended); "
                "nothing was changed.",
                409,
            )
        return restate.TerminalError(
            f"There is no pending approval request {request_id!r} for this agent.", 404
        )
