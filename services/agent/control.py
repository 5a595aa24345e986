"""Turn control: approvals that park and resume, supersede, and stop."""

from __future__ import annotations

from typing import Literal

import msgspec
import restate

from schemas.events import (
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRefused,
    StopRefused,
    TurnParked,
    WakeResult,
)
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
            raise await self._refuse_answer(answer)
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
            summary = await self._summary()
            await self.timeline.append(summary.turns, 0, StopRefused(message=self._note))
        else:
            await self.stop_waiting(turn)
        return await self.result()

    async def abandon(self, turn: TurnState) -> None:
        if turn.approval is not None:
            abandoned = ApprovalAbandoned(turn.approval.request_id)
            await self.timeline.append(turn.number, turn.round, abandoned)
            await self._remember_answer(turn.approval.request_id, ended=True)

    async def _park(self, turn: TurnState) -> None:
        if turn.approval is None or turn.approval.answer is not None or turn.parked:
            return
        await self.timeline.append(turn.number, turn.round, TurnParked(turn.approval.request_id))
        self._ctx.set(TURN, msgspec.structs.replace(turn, parked=True))

    async def _remember_answer(self, request_id: str, *, ended: bool = False) -> None:
        answered = await self._ctx.get(ANSWERED, type_hint=Answered) or Answered()
        kept = (*answered.requests, request_id)[-KEEP_ANSWERED:]
        gone = (*answered.ended, request_id) if ended else answered.ended
        self._ctx.set(ANSWERED, Answered(kept, tuple(r for r in gone if r in kept)))

    async def _refuse_answer(self, answer: Approval) -> restate.TerminalError:
        """Record on the timeline why an answer changed nothing (its sender may have sent
        it one-way), and say it to a sender that waits."""
        answered = await self._ctx.get(ANSWERED, type_hint=Answered) or Answered()
        reason, status, sentence = _refusal(answer.request_id, answered)
        refused = ApprovalRefused(answer.request_id, reason, answer.approve, answer.by, sentence)
        turn = await self.turn()
        number = turn.number if turn is not None else (await self._summary()).turns
        await self.timeline.append(number, turn.round if turn else 0, refused)
        return restate.TerminalError(sentence, status)


def _refusal(
    request_id: str, answered: Answered
) -> tuple[Literal["already_answered", "unknown_request", "turn_ended"], int, str]:
    if request_id in answered.ended:
        return (
            "turn_ended",
            409,
            (
                f"Approval request {request_id!r} was not answered before its turn ended; "
                "nothing was changed."
            ),
        )
    if request_id in answered.requests:
        return (
            "already_answered",
            409,
            (f"Approval request {request_id!r} was already answered; nothing was changed."),
        )
    return (
        "unknown_request",
        404,
        (f"There is no pending approval request {request_id!r} for this agent."),
    )
