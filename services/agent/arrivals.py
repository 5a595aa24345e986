"""What a message that finds a turn in progress (or the agent paused) does, and what a
pause holds: pure, like the machine (`machine.py`), which decides when they apply."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage
from schemas.events import AgentPaused, MessageQueued, MessageRejected, MessageSteered
from schemas.harness import AwaitingApproval, AwaitingChildren, Running, TurnState
from schemas.state import AgentRecord
from schemas.wake import Message, Pause
from services.agent.reaction import Emit, Reaction, RefuseWake

ALREADY_PAUSED = "The agent is paused already."
REJECTED_PAUSED = "The agent is paused, and the message asked to be rejected then: it ran nothing."
REJECTED = "A turn was in progress, and the message asked to be rejected then: it ran nothing."
QUEUE_FULL = (
    "The agent holds {limit} queued messages, the most its queue may hold "
    "(TEASPILL_AGENT_QUEUE): it ran nothing. Send it again once the agent works through them."
)
QUEUE_LIMIT = 100
"""Messages an agent's record holds queued unless the composition root says otherwise:
the queue lives in the agent's one state value, which must stay bounded."""


def where(record: AgentRecord) -> tuple[int, int]:
    """The turn and round an event that is not part of a running round goes under."""
    turn = record.turn
    return (turn.number, turn.round) if turn is not None else (record.turns, 0)


def queue(record: AgentRecord, message: Message, limit: int = QUEUE_LIMIT) -> Reaction:
    """Behind the turn in progress (or the pause); refused like a reject once the queue
    holds `limit` messages."""
    if len(record.queue) >= limit:
        sentence = QUEUE_FULL.format(limit=limit)
        refused = MessageRejected(message.text, message.id, sentence)
        return Reaction(record, (Emit(*where(record), (refused,)), RefuseWake(429, sentence)))
    queued = msgspec.structs.replace(record, queue=(*record.queue, message))
    event = MessageQueued(message.text, message.id, message.user)
    return Reaction(queued, (Emit(*where(record), (event,)),))


def reject(record: AgentRecord, message: Message) -> Reaction:
    """Recorded (a one-way sender does not wait) and refused to a sender that waits."""
    sentence = REJECTED_PAUSED if record.paused else REJECTED
    event = MessageRejected(message.text, message.id, sentence)
    return Reaction(record, (Emit(*where(record), (event,)), RefuseWake(409, sentence)))


def steer(record: AgentRecord, turn: TurnState, message: Message) -> Reaction:
    """Join a turn that waits: its next round shows the message, after what it waited
    for. (A running turn is joined at a round boundary: see the `arrived` handler.)"""
    user = ChatMessage(role="user", content=message.text)
    joined = msgspec.structs.replace(turn, arrived=(*turn.arrived, user))
    event = MessageSteered(message.text, message.id)
    updated = msgspec.structs.replace(record, turn=joined)
    return Reaction(updated, (Emit(turn.number, turn.round, (event,)),))


def on_pause(record: AgentRecord, pause: Pause) -> Reaction:
    if record.paused:
        return Reaction(record, note=ALREADY_PAUSED)
    paused = msgspec.structs.replace(record, paused=True)
    return Reaction(paused, (Emit(*where(record), (AgentPaused(pause.by),)),))


def can_go_on(turn: TurnState) -> bool:
    match turn.phase:
        case Running():
            return True
        case AwaitingChildren():
            return not turn.pending
        case AwaitingApproval() as phase:
            return not phase.waiting()
