"""What a wake decides, as a pure function: `react(address, record, input) -> Reaction`.

Queue or start, supersede, resume after an answer or a child, park, stop and end are
decided here from the agent's record and what arrived, with no I/O, no clock and no
Restate: the driver (`driver.py`) performs the effects, and feeds what they produce (a
spec found, a turn that ran) back in as the next input. The same inputs always give the
same reaction, which is what makes a durable replay and a unit test the same thing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import msgspec

from schemas.address import parse_address
from schemas.chat import ChatMessage
from schemas.context import ContextState, Segment
from schemas.events import (
    AgentState,
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRefused,
    ChildReported,
    EventBody,
    MessageQueued,
    Outcome,
    ScheduleFired,
    ScheduleSkipped,
    StopRefused,
    TurnEnded,
    TurnParked,
    TurnStarted,
)
from schemas.harness import AwaitingApproval, AwaitingChildren, TurnState
from schemas.spec import AgentSpec
from schemas.state import KEEP_ANSWERED, AgentRecord, Ledger
from schemas.wake import Approval, ChildReport, Message, ScheduleSkip, Stop, Timer, Wake
from services.harness.loop import child_reported, is_pending

STOPPED = "Stopped on request."
SUPERSEDED = "A newer message superseded this turn while it waited for an answer."
NOTHING_TO_STOP = "The agent has no turn in progress; there is nothing to stop."
PARK, DEQUEUE = "park", "dequeue"
BUSY = "The agent had a turn in progress, and the schedule skips a fire that finds it busy."
LATE = (
    "Fired late, once for the whole time the service was down: {missed} planned fires fell "
    "in it and were not run one by one."
)
RefusalReason = Literal["already_answered", "unknown_request", "turn_ended"]

# --- inputs: a wake, or what an effect produced ------------------------------------


@dataclass(frozen=True)
class SpecFound:
    """The answer to `FindSpec`: the newest published spec of a kind, or None."""

    message: Message
    spec: AgentSpec | None
    direct: bool


@dataclass(frozen=True)
class TurnRan:
    """The answer to `Drive`: the turn as the harness left it. `ending` is None when the
    turn paused (its phase says for what)."""

    turn: TurnState
    ending: tuple[Outcome, str] | None
    ledger: Ledger | None = None
    """The daily ledger after the turn's model calls (None: unchanged)."""
    context: ContextState | None = None
    """The history's marks after the turn's folds and model calls (None: unchanged)."""


@dataclass(frozen=True)
class TurnStopped:
    """`Drive` was cancelled by a stop; `turn` carries the round and usage it reached."""

    turn: TurnState
    ledger: Ledger | None = None
    context: ContextState | None = None


Input = Wake | SpecFound | TurnRan | TurnStopped

# --- effects ----------------------------------------------------------------------


@dataclass(frozen=True)
class Emit:
    """Append events to the timeline."""

    turn: int
    round: int
    bodies: tuple[EventBody, ...]


@dataclass(frozen=True)
class SendWake:
    """A one-way wake to an agent (this one, a child or a parent)."""

    address: str
    wake: Wake
    key: str | None = None
    delay: timedelta | None = None


@dataclass(frozen=True)
class FindSpec:
    """Look up the newest published spec of `kind`; answered with `SpecFound`."""

    message: Message
    kind: str
    direct: bool


@dataclass(frozen=True)
class Drive:
    """Run the turn's rounds until it pauses or ends; answered with `TurnRan` (or
    `TurnStopped`)."""

    turn: TurnState


@dataclass(frozen=True)
class Remember:
    """Write history segment `index` (once): messages later turns see."""

    index: int
    segment: Segment


@dataclass(frozen=True)
class RefuseWake:
    """Answer the wake's sender with an error; nothing else of this input happens."""

    status: int
    sentence: str


Effect = Emit | SendWake | FindSpec | Drive | Remember | RefuseWake


@dataclass(frozen=True)
class Reaction:
    """The new record and what to do. An effect that answers (`FindSpec`, `Drive`) or
    ends the wake (`RefuseWake`) is always the last one."""

    record: AgentRecord
    effects: tuple[Effect, ...] = ()
    reply: str | None = None
    """Set when a turn ended: its final reply if it succeeded, else empty."""
    note: str = ""


def state_of(turn: TurnState | None) -> AgentState:
    """The agent's status, from the phase of its turn: the one place it is decided."""
    match turn:
        case None:
            return "idle"
        case TurnState(phase=AwaitingApproval(parked=True)):
            return "parked"
        case TurnState(phase=AwaitingApproval() | AwaitingChildren()):
            return "waiting"
    return "running"


def react(address: str, record: AgentRecord, given: Input) -> Reaction:  # noqa: PLR0911 - one per kind
    match given:
        case Message() | ScheduleSkip():
            return _on_message(address, record, given)
        case SpecFound():
            return _on_spec(address, record, given)
        case TurnRan() | TurnStopped() if given.ledger is not None or given.context is not None:
            kept = _kept(record, given.ledger, given.context)
            return react(address, kept, dataclasses.replace(given, ledger=None, context=None))
        case TurnRan():
            return _on_ran(address, record, given)
        case TurnStopped(turn=turn):
            return _stopped(address, record, turn)
        case ChildReport():
            return _on_child(record, given)
        case Approval():
            return _on_approval(record, given)
        case Timer(name=name, turn=number):
            return _on_timer(address, record, name, number)
        case Stop():
            return _on_stop(address, record)


def _kept(record: AgentRecord, ledger: Ledger | None, context: ContextState | None) -> AgentRecord:
    """The record with the ledger and the history marks a driven turn left."""
    return msgspec.structs.replace(
        record, ledger=ledger or record.ledger, context=context or record.context
    )


# --- messages and turns ---------------------------------------------------------------


def _on_message(address: str, record: AgentRecord, message: Message | ScheduleSkip) -> Reaction:
    if isinstance(message, ScheduleSkip):
        now = record.turn
        turn, round_ = (now.number, now.round) if now is not None else (record.turns, 0)
        skipped = ScheduleSkipped(message.schedule, message.planned, BUSY)
        return Reaction(record, (Emit(turn, round_, (skipped,)),))
    reaction = _arrived(address, record, message)
    if message.schedule is None:
        return reaction
    fired = message.schedule
    note = LATE.format(missed=fired.missed) if fired.missed else ""
    body = ScheduleFired(fired.schedule, fired.planned, fired.missed, note)
    turn, round_ = _position(record)
    return dataclasses.replace(reaction, effects=(Emit(turn, round_, (body,)), *reaction.effects))


def _position(record: AgentRecord) -> tuple[int, int]:
    """The turn and round an event that arrives now is recorded under: the turn in
    progress, else the turn a message would start."""
    if record.turn is not None:
        return record.turn.number, record.turn.round
    return record.turns + 1, 0


def _arrived(address: str, record: AgentRecord, message: Message) -> Reaction:
    turn = record.turn
    if turn is None:
        return _start(address, record, message, direct=True)
    if isinstance(turn.phase, AwaitingApproval):
        ended = _end(address, record, turn, "superseded", SUPERSEDED)
        return _then(ended, _start(address, ended.record, message, direct=True))
    queued = msgspec.structs.replace(record, queue=(*record.queue, message))
    return Reaction(
        queued, (Emit(turn.number, turn.round, (MessageQueued(message.text, message.id),)),)
    )


def _start(address: str, record: AgentRecord, message: Message, *, direct: bool) -> Reaction:
    """Start `message`'s turn with its spec, or ask for the published one first."""
    if message.spec is not None:
        return _begin(msgspec.structs.replace(record, spec=message.spec), message, message.spec)
    stored = record.spec
    kind = message.kind or (stored.kind if stored is not None and stored.version > 0 else None)
    if kind is not None:
        return Reaction(record, (FindSpec(message, kind, direct),))
    if stored is not None:
        return _begin(record, message, stored)
    return _no_spec(address, record, message, direct=direct)


def _on_spec(address: str, record: AgentRecord, found: SpecFound) -> Reaction:
    if found.spec is None:
        return _no_spec(address, record, found.message, direct=found.direct)
    return _begin(msgspec.structs.replace(record, spec=found.spec), found.message, found.spec)


def _begin(record: AgentRecord, message: Message, spec: AgentSpec) -> Reaction:
    number = record.turns + 1
    parent = message.parent.address if message.parent else None
    user = ChatMessage(role="user", content=message.text)
    budget = message.budget if message.parent is not None else None
    turn = TurnState(
        number, spec, (user,), parent=message.parent, depth=message.depth, budget=budget
    )
    started = Emit(
        number, 0, (TurnStarted(message.text, spec.kind, spec.version, parent, message.id),)
    )
    begun = msgspec.structs.replace(record, turns=number, turn=turn)
    return Reaction(begun, (started, Drive(turn)))


def _no_spec(address: str, record: AgentRecord, message: Message, *, direct: bool) -> Reaction:
    """A sender waiting for the wake gets 404; a queued message is recorded as a turn that
    failed, so its sender can read why."""
    reason = missing_spec(address, message)
    if direct:
        return Reaction(record, (RefuseWake(404, reason),))
    spec = AgentSpec(kind=message.kind or "", instructions="")
    number = record.turns + 1
    turn = TurnState(number, spec, (ChatMessage(role="user", content=message.text),))
    started = Emit(
        number, 0, (TurnStarted(message.text, spec.kind, spec.version, None, message.id),)
    )
    begun = msgspec.structs.replace(record, turns=number, turn=turn)
    ended = _end(address, begun, turn, "failed", reason)
    return _then(Reaction(begun, (started,)), _then(ended, _next(address, ended.record)))


def missing_spec(address: str, message: Message) -> str:
    if message.kind:
        tenant = parse_address(address).tenant
        return f"No spec of kind {message.kind!r} is published for tenant {tenant!r}."
    return f"Agent {address} has no spec yet: its first message must carry a spec or a kind."


def _on_ran(address: str, record: AgentRecord, ran: TurnRan) -> Reaction:
    turn = ran.turn
    if ran.ending is not None:
        ended = _end(address, record, turn, *ran.ending)
        return _then(ended, _next(address, ended.record))
    paused = msgspec.structs.replace(record, turn=turn)
    if isinstance(turn.phase, AwaitingApproval):
        delay = timedelta(seconds=turn.spec.limits.approval_timeout)
        park = SendWake(address, Timer(PARK, turn=turn.number), delay=delay)
        return Reaction(paused, (park,))
    return Reaction(paused)


def _stopped(address: str, record: AgentRecord, turn: TurnState) -> Reaction:
    """The running wake was cancelled: it does no more work, so what queued behind the
    turn runs in a new wake."""
    ended = _end(address, record, turn, "stopped", STOPPED)
    if not ended.record.queue:
        return ended
    return _then(ended, Reaction(ended.record, (SendWake(address, Timer(DEQUEUE)),)))


def _end(
    address: str, record: AgentRecord, turn: TurnState, outcome: Outcome, text: str
) -> Reaction:
    """Record the ending, keep the turn's messages, and report to the parent."""
    effects: list[Effect] = []
    answered, abandoned = record.answered, record.abandoned
    if isinstance(turn.phase, AwaitingApproval):
        request = turn.phase.approval.request_id
        effects.append(Emit(turn.number, turn.round, (ApprovalAbandoned(request),)))
        answered = _remember(answered, request)
        abandoned = tuple(r for r in (*abandoned, request) if r in answered)
    succeeded = outcome == "succeeded"
    body = TurnEnded(
        outcome, reply=text if succeeded else "", reason="" if succeeded else text, usage=turn.usage
    )
    record, remember = _remembered(record, Segment(turn.number, turn.messages))
    effects += [Emit(turn.number, turn.round, (body,)), remember]
    if turn.parent is not None:
        report = ChildReport(address, turn.parent.turn, turn.parent.call_id, outcome, text)
        key = f"finished {address} {turn.number}"
        effects.append(SendWake(turn.parent.address, report, key=key))
    ended = msgspec.structs.replace(
        record, turn=None, last_outcome=outcome, answered=answered, abandoned=abandoned
    )
    return Reaction(ended, tuple(effects), reply=text if succeeded else "")


def _remembered(record: AgentRecord, segment: Segment) -> tuple[AgentRecord, Remember]:
    """The record counting one more history segment, and the effect that writes it."""
    index = record.context.segments
    context = msgspec.structs.replace(record.context, segments=index + 1)
    return msgspec.structs.replace(record, context=context), Remember(index, segment)


def _next(address: str, record: AgentRecord) -> Reaction:
    """Start the next queued message, if any."""
    if not record.queue:
        return Reaction(record)
    message, rest = record.queue[0], record.queue[1:]
    return _start(address, msgspec.structs.replace(record, queue=rest), message, direct=False)


# --- children, approvals, timers, stop ------------------------------------------------


def _on_child(record: AgentRecord, report: ChildReport) -> Reaction:
    turn = record.turn
    event = ChildReported(report.call_id, report.child, report.outcome, report.reply)
    if turn is None or turn.number != report.turn or not is_pending(turn, report.child):
        late = ChatMessage(
            role="user",
            content=f"(Helper {report.child} finished later ({report.outcome}): {report.reply})",
        )
        # Under the newest turn's number, so that segments stay in turn order.
        record, remember = _remembered(record, Segment(record.turns, (late,)))
        return Reaction(record, (Emit(report.turn, 0, (event,)), remember))
    turn = child_reported(turn, report)
    emitted = Emit(turn.number, turn.round, (event,))
    updated = msgspec.structs.replace(record, turn=turn)
    if isinstance(turn.phase, AwaitingChildren) and not turn.pending:
        return Reaction(updated, (emitted, Drive(turn)))
    return Reaction(updated, (emitted,))


def _on_approval(record: AgentRecord, answer: Approval) -> Reaction:
    """Run or refuse the call a person answered: the turn goes on where it paused."""
    turn = record.turn
    phase = turn.phase if turn is not None else None
    if (
        turn is None
        or not isinstance(phase, AwaitingApproval)
        or phase.approval.request_id != answer.request_id
        or phase.approval.answer is not None
    ):
        return _refuse_answer(record, answer)
    answered = msgspec.structs.replace(phase.approval, answer=answer.approve, note=answer.note)
    resumed = msgspec.structs.replace(turn, phase=msgspec.structs.replace(phase, approval=answered))
    event = ApprovalAnswered(answer.request_id, answer.approve, answer.note, answer.by)
    updated = msgspec.structs.replace(
        record, turn=resumed, answered=_remember(record.answered, answer.request_id)
    )
    return Reaction(updated, (Emit(turn.number, turn.round, (event,)), Drive(resumed)))


def _refuse_answer(record: AgentRecord, answer: Approval) -> Reaction:
    """An answer that changes nothing is recorded (its sender may not wait for the wake)
    and refused to a sender that waits."""
    request = answer.request_id
    reason: RefusalReason
    if request in record.abandoned:
        reason, status = "turn_ended", 409
        sentence = f"Approval request {request!r} was not answered before its turn ended"
    elif request in record.answered:
        reason, status = "already_answered", 409
        sentence = f"Approval request {request!r} was already answered"
    else:
        reason, status = "unknown_request", 404
        sentence = f"There is no pending approval request {request!r} for this agent"
    sentence += "; nothing was changed." if status == 409 else "."
    refused = ApprovalRefused(request, reason, answer.approve, answer.by, sentence)
    turn = record.turn
    number, round_ = (turn.number, turn.round) if turn is not None else (record.turns, 0)
    return Reaction(record, (Emit(number, round_, (refused,)), RefuseWake(status, sentence)))


def _remember(answered: tuple[str, ...], request_id: str) -> tuple[str, ...]:
    return (*answered, request_id)[-KEEP_ANSWERED:]


def _on_timer(address: str, record: AgentRecord, name: str, number: int) -> Reaction:
    turn = record.turn
    if name == DEQUEUE:
        return _next(address, record) if turn is None else Reaction(record)
    if name != PARK or turn is None or turn.number != number:
        return Reaction(record)
    phase = turn.phase
    if not isinstance(phase, AwaitingApproval) or phase.approval.answer is not None:
        return Reaction(record)
    if phase.parked:
        return Reaction(record)
    parked = msgspec.structs.replace(turn, phase=msgspec.structs.replace(phase, parked=True))
    event = Emit(turn.number, turn.round, (TurnParked(phase.approval.request_id),))
    return Reaction(msgspec.structs.replace(record, turn=parked), (event,))


def _on_stop(address: str, record: AgentRecord) -> Reaction:
    """Stop a turn that waits or is parked. (A running turn is stopped by cancelling its
    invocation: see the `stop` handler.)"""
    if record.turn is None:
        refused = Emit(record.turns, 0, (StopRefused(message=NOTHING_TO_STOP),))
        return Reaction(record, (refused,), note=NOTHING_TO_STOP)
    ended = _end(address, record, record.turn, "stopped", STOPPED)
    return _then(ended, _next(address, ended.record))


def _then(first: Reaction, second: Reaction) -> Reaction:
    """`first`'s effects, then `second`'s (which was computed from `first.record`)."""
    reply = second.reply if second.reply is not None else first.reply
    return Reaction(
        second.record, (*first.effects, *second.effects), reply, second.note or first.note
    )
