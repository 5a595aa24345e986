"""The agent's object state: its keys, and the status read from them."""

from __future__ import annotations

import restate

from schemas.events import AgentState, AgentStatus
from schemas.harness import TurnState
from schemas.state import Ledger, Queue, Summary
from services.agent.timeline import last_seq_of

TURN = "turn"
HISTORY = "history"
QUEUE = "queue"
SUMMARY = "summary"
RUNNING = "running"
"""The id of the invocation driving a turn right now, so that a stop can cancel it."""
ANSWERED = "answered"
LEDGER = "ledger"

Readable = restate.ObjectSharedContext | restate.ObjectContext


def state_of(turn: TurnState | None) -> AgentState:
    if turn is None:
        return "idle"
    if turn.parked:
        return "parked"
    if turn.waiting or turn.approval is not None:
        return "waiting"
    return "running"


async def status(ctx: Readable, address: str) -> AgentStatus:
    turn = await ctx.get(TURN, type_hint=TurnState)
    summary = await ctx.get(SUMMARY, type_hint=Summary) or Summary()
    queue = await ctx.get(QUEUE, type_hint=Queue) or Queue()
    ledger = await ctx.get(LEDGER, type_hint=Ledger) or Ledger()
    return AgentStatus(
        address=address,
        state=state_of(turn),
        turn=summary.turns,
        last_seq=await last_seq_of(ctx),
        last_outcome=summary.last_outcome,
        queued=len(queue.messages),
        tokens_day=ledger.day,
        tokens_used=ledger.day_tokens,
    )
