"""The agent's object state: its keys, and the status read from them."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import restate

from schemas.events import AgentState, AgentStatus
from schemas.harness import TurnState
from schemas.state import Ledger, Queue, Summary
from schemas.wake import Wake, WakeEnvelope
from services.agent.timeline import last_seq_of

TURN = "turn"
HISTORY = "history"
QUEUE = "queue"
SUMMARY = "summary"
RUNNING = "running"
"""The id of the invocation driving a turn right now, so that a stop can cancel it."""
ANSWERED = "answered"
LEDGER = "ledger"

AGENT = "Agent"

Readable = restate.ObjectSharedContext | restate.ObjectContext


def send_wake(
    ctx: restate.Context,
    address: str,
    wake: Wake,
    *,
    key: str | None = None,
    delay: timedelta | None = None,
) -> None:
    """A one-way wake to an agent (this one, a child or a parent): never a call, so two
    agents never wait on each other."""
    body = msgspec.json.encode(WakeEnvelope(wake))
    ctx.generic_send(AGENT, "wake", body, key=address, idempotency_key=key, send_delay=delay)


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
