"""What a wake decides, as a pure function: `react(address, record, input) -> Reaction`.

Queue or start, supersede, resume after an answer or a child, park, stop and end are
decided here from the agent's record and what arrived, with no I/O, no clock and no
Restate: the driver (`driver.py`) performs the effects, and feeds what they produce (a
spec found, a turn that ran) back in as the next input. The same inputs always give the
same reaction, which is what makes a durable replay and a unit test the same thing.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import msgspec

from schemas.address import parse_address
from schemas.chat import ChatMessage
from schemas.context import ContextState, Segment
from schemas.events import (
    AgentResumed,
    AgentState,
    ApprovalAbandoned,
    ChildReported,
    FailedBy,
    MessageRejected,
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
from schemas.wake import (
    Approval,
    ChildReport,
    Message,
    PageCall,
    Pause,
    Resume,
    ScheduleSkip,
    Stop,
    Timer,
    policy,
)
from services.agent.approvals import on_approval, remember
from services.agent.arrivals import (
    QUEUE_LIMIT,
    can_go_on,
    on_pause,
    queue,
    reject,
    steer,
    where,
)
from services.agent.pages import on_page_call
from services.agent.reaction import (
    Drive,
    Effect,
    Emit,
    FindSpec,
    Input,
    Reaction,
    RefuseWake,
    Remember,
    SendWake,
    SpecFound,
    Start,
    TurnRan,
    TurnStopped,
    Unfunded,
)
from services.harness.children import child_reported, is_pending

__all__ = [
    "Drive",
    "Effect",
    "Emit",
    "FindSpec",
    "Input",
    "Reaction",
    "RefuseWake",
    "Remember",
    "SendWake",
    "SpecFound",
    "TurnRan",
    "TurnStopped",
    "Unfunded",
    "react",
    "state_of",
]

STOPPED = "Stopped on request."
SUPERSEDED = "A newer message superseded this turn while it waited for an answer."
INTERRUPTED = "Stopped by a newer message, which asked to interrupt the turn in progress."
NOTHING_TO_STOP = "The agent has no turn in progress; there is nothing to stop."
NOT_THAT_TURN = "Turn {turn} is not the turn in progress; the stop changed nothing."
NOT_PAUSED = "The agent is not paused; there is nothing to resume."
PARK, DEQUEUE = "park", "dequeue"
BUSY = "The agent had a turn in progress, and the schedule skips a fire that finds it busy."
LATE = (
    "Fired late, once for the whole time the service was down: {missed} planned fires fell "
    "in it and were not run one by one."
)


def state_of(turn: TurnState | None, *, paused: bool = False) -> AgentState:
    """The agent's status, from the phase of its turn: the one place it is decided."""
    if paused:
        return "paused"
    match turn:
        case None:
            return "idle"
        case TurnState(phase=AwaitingApproval(parked=True)):
            return "parked"
        case TurnState(phase=AwaitingApproval() | AwaitingChildren()):
            return "waiting"
    return "running"


def react(  # noqa: C901, PLR0911 - one per kind
    address: str, record: AgentRecord, given: Input, *, queue_limit: int = QUEUE_LIMIT
) -> Reaction:
    """`queue_limit`: the most messages the record may hold queued."""
    match given:
        case Message() | ScheduleSkip():
            return _on_message(address, record, given, queue_limit)
        case SpecFound():
            return _on_spec(address, record, given)
        case Unfunded():
            return _unfunded(address, record, given)
        case TurnRan() | TurnStopped() if given.ledger or given.context or given.steered:
            kept = _kept(record, given.ledger, given.context, given.steered)
            bare = dataclasses.replace(given, ledger=None, context=None, steered=())
            return react(address, kept, bare, queue_limit=queue_limit)
        case TurnRan():
            return _on_ran(address, record, given)
        case TurnStopped(turn=turn):
            return _stopped(address, record, turn)
        case ChildReport():
            return _on_child(record, given)
        case Approval():
            return on_approval(record, given)
        case PageCall():
            return on_page_call(record, given)
        case Timer(name=name, turn=number):
            return _on_timer(address, record, name, number)
        case Stop() | Pause() | Resume():
            return _on_control(address, record, given)


def _kept(
    record: AgentRecord,
    ledger: Ledger | None,
    context: ContextState | None,
    steered: tuple[str, ...],
) -> AgentRecord:
    """The record with the ledger, the history marks and the steered messages a driven
    turn left."""
    return msgspec.structs.replace(
        record,
        ledger=ledger or record.ledger,
        context=context or record.context,
        steered=(*record.steered, *steered)[-KEEP_ANSWERED:],
    )


# --- messages and turns ---------------------------------------------------------------


def _on_message(
    address: str, record: AgentRecord, message: Message | ScheduleSkip, limit: int
) -> Reaction:
    if isinstance(message, ScheduleSkip):
        skipped = ScheduleSkipped(message.schedule, message.planned, BUSY)
        return Reaction(record, (Emit(*where(record), (skipped,)),))
    reaction = _arrived(address, record, message, limit)
    if message.schedule is None:
        return reaction
    fired = message.schedule
    note = LATE.format(missed=fired.missed) if fired.missed else ""
    body = ScheduleFired(fired.schedule, fired.planned, fired.missed, note, fired.sent)
    turn, round_ = _position(record)
    return dataclasses.replace(reaction, effects=(Emit(turn, round_, (body,)), *reaction.effects))


def _position(record: AgentRecord) -> tuple[int, int]:
    """The turn and round an event that arrives now is recorded under: the turn in
    progress, else the turn a message would start."""
    if record.turn is not None:
        return record.turn.number, record.turn.round
    return record.turns + 1, 0


def _arrived(  # noqa: PLR0911 - one per policy
    address: str, record: AgentRecord, message: Message, limit: int
) -> Reaction:
    if message.id and message.id in record.steered:
        return Reaction(record)  # it joined a running turn already
    turn = record.turn
    if turn is None and not record.paused:
        return _start(address, record, message, direct=True)
    rule = policy(message, turn.spec if turn is not None else record.spec)
    if rule == "reject":
        return reject(record, message)
    if turn is None or record.paused:
        return queue(record, message, limit)
    if rule == "interrupt":
        ended = _end(address, record, turn, "stopped", INTERRUPTED)
        return _then(ended, _start(address, ended.record, message, direct=True))
    if rule == "steer" and turn.spec.composition is None:  # a composition reads no messages
        return steer(record, turn, message)
    if isinstance(turn.phase, AwaitingApproval):
        ended = _end(address, record, turn, "superseded", SUPERSEDED)
        return _then(ended, _start(address, ended.record, message, direct=True))
    return queue(record, message, limit)


def _start(address: str, record: AgentRecord, message: Message, *, direct: bool) -> Reaction:
    """Start `message`'s turn with its spec, or ask for the published one first."""
    if message.spec is not None:
        spec = message.spec
        return _begin(msgspec.structs.replace(record, spec=spec), message, spec, direct=direct)
    stored = record.spec
    kind = message.kind or (stored.kind if stored is not None and stored.version > 0 else None)
    if kind is not None:
        return Reaction(record, (FindSpec(message, kind, direct),))
    if stored is not None:
        return _begin(record, message, stored, direct=direct)
    return _no_spec(address, record, message, direct=direct)


def _on_spec(address: str, record: AgentRecord, found: SpecFound) -> Reaction:
    if found.spec is None:
        return _no_spec(address, record, found.message, direct=found.direct)
    spec = found.spec
    return _begin(
        msgspec.structs.replace(record, spec=spec), found.message, spec, direct=found.direct
    )


def _begin(record: AgentRecord, message: Message, spec: AgentSpec, *, direct: bool) -> Reaction:
    """The turn, recorded as started only once the driver found it funded."""
    number = record.turns + 1
    parent = message.parent.address if message.parent else None
    user = ChatMessage(role="user", content=message.text)
    turn = TurnState(
        number,
        spec,
        (user,),
        parent=message.parent,
        depth=message.depth,
        page_tools=message.page_tools,
        user=message.user,
    )
    if message.parent is not None:  # what it may make, use and reach: shares of its parent's
        turn = msgspec.structs.replace(
            turn, budget=message.budget, tokens=message.tokens, max_depth=message.max_depth
        )
    started = TurnStarted(
        message.text, spec.kind, spec.version, parent, message.id, user=message.user
    )
    begun = msgspec.structs.replace(record, turns=number, turn=turn)
    return Reaction(begun, (Drive(turn, Start(message, started, direct)),))


def _unfunded(address: str, record: AgentRecord, refused: Unfunded) -> Reaction:
    """The turn never existed: the message is recorded as refused; a parent hears of it
    in a failed report, a sender that waits gets 429; what queued behind it goes on."""
    message, sentence = refused.start.message, refused.sentence
    record = msgspec.structs.replace(record, turns=record.turns - 1, turn=None)
    rejected = MessageRejected(message.text, message.id, sentence)
    effects: list[Effect] = [Emit(*where(record), (rejected,))]
    if (parent := message.parent) is not None:
        report = ChildReport(address, parent.turn, parent.call_id, "failed", sentence, parent.span)
        key = f"refused {address} {record.turns + 1} {message.id}"
        effects.append(SendWake(parent.address, report, key=key))
    elif refused.start.direct and not record.queue:
        effects.append(RefuseWake(429, sentence))
        return Reaction(record, tuple(effects))
    return _then(Reaction(record, tuple(effects)), _next(address, record))


def _no_spec(address: str, record: AgentRecord, message: Message, *, direct: bool) -> Reaction:
    """A sender waiting for the wake gets 404; a queued message is recorded as a turn that
    failed, so its sender can read why."""
    reason = missing_spec(address, message)
    if direct and message.parent is None:  # a child's parent hears of it in a report
        return Reaction(record, (RefuseWake(404, reason),))
    spec = AgentSpec(kind=message.kind or "", instructions="")
    number = record.turns + 1
    user = (ChatMessage(role="user", content=message.text),)
    turn = TurnState(number, spec, user, parent=message.parent, depth=message.depth)
    started = Emit(
        number,
        0,
        (TurnStarted(message.text, spec.kind, spec.version, None, message.id, message.user),),
    )
    begun = msgspec.structs.replace(record, turns=number, turn=turn)
    ended = _end(address, begun, turn, "failed", reason, failed_by="step")
    return _then(Reaction(begun, (started,)), _then(ended, _next(address, ended.record)))


def missing_spec(address: str, message: Message) -> str:
    if message.kind:
        tenant = parse_address(address).tenant
        return f"No spec of kind {message.kind!r} is published for tenant {tenant!r}."
    return f"Agent {address} has no spec yet: its first message must carry a spec or a kind."


def _on_ran(address: str, record: AgentRecord, ran: TurnRan) -> Reaction:
    turn = ran.turn
    record = msgspec.structs.replace(record, spec=turn.spec)  # a handoff's, from now on
    if ran.ending is not None:
        ended = _end(address, record, turn, *ran.ending, failed_by=ran.failed_by)
        if ran.held is not None:
            ended = _then(ended, on_pause(ended.record, ran.held))
        return _then(ended, _next(address, ended.record))
    paused = msgspec.structs.replace(record, turn=turn)
    if ran.held is not None:
        return on_pause(paused, ran.held)
    if isinstance(turn.phase, AwaitingApproval):
        delay = timedelta(seconds=turn.spec.limits.approval_timeout)
        park = SendWake(address, Timer(PARK, turn=turn.number), delay=delay)
        return Reaction(paused, (park,))
    return Reaction(paused)


def _stopped(address: str, record: AgentRecord, turn: TurnState) -> Reaction:
    """The running wake was cancelled: it does no more work, so what queued behind the
    turn runs in a new wake."""
    record = msgspec.structs.replace(record, spec=turn.spec)  # a handoff's, from now on
    ended = _end(address, record, turn, "stopped", STOPPED)
    if not ended.record.queue:
        return ended
    return _then(ended, Reaction(ended.record, (SendWake(address, Timer(DEQUEUE)),)))


def _end(
    address: str,
    record: AgentRecord,
    turn: TurnState,
    outcome: Outcome,
    text: str,
    *,
    failed_by: FailedBy = "",
) -> Reaction:
    """Record the ending, keep the turn's messages, and report to the parent."""
    effects: list[Effect] = []
    answered, abandoned = record.answered, record.abandoned
    if isinstance(turn.phase, AwaitingApproval):
        for asked in turn.phase.waiting() or (turn.phase.approval,):
            request = asked.request_id
            effects.append(Emit(turn.number, turn.round, (ApprovalAbandoned(request),)))
            answered = remember(answered, request)
            abandoned = tuple(r for r in (*abandoned, request) if r in answered)
    succeeded = outcome == "succeeded"
    body = TurnEnded(
        outcome,
        reply=text if succeeded else "",
        reason="" if succeeded else text,
        usage=turn.usage,
        failed_by=failed_by if outcome == "failed" else "",
    )
    record, kept = _remembered(record, Segment(turn.number, turn.messages))
    effects += [Emit(turn.number, turn.round, (body,)), kept]
    if turn.parent is not None:
        parent = turn.parent
        report = ChildReport(
            address, parent.turn, parent.call_id, outcome, text, parent.span, turn.usage
        )
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
    """Start the next queued message, if any (none while paused)."""
    if not record.queue or record.paused:
        return Reaction(record)
    message, rest = record.queue[0], record.queue[1:]
    return _start(address, msgspec.structs.replace(record, queue=rest), message, direct=False)


# --- children, timers, stop, pause ----------------------------------------------------


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
    if isinstance(turn.phase, AwaitingChildren) and not turn.pending and not record.paused:
        return Reaction(updated, (emitted, Drive(turn)))
    return Reaction(updated, (emitted,))


def _on_timer(address: str, record: AgentRecord, name: str, number: int) -> Reaction:
    turn = record.turn
    if name == DEQUEUE:
        return _next(address, record) if turn is None else Reaction(record)
    if name != PARK or turn is None or turn.number != number:
        return Reaction(record)
    phase = turn.phase
    if not isinstance(phase, AwaitingApproval) or not phase.waiting() or phase.parked:
        return Reaction(record)
    parked = msgspec.structs.replace(turn, phase=msgspec.structs.replace(phase, parked=True))
    event = Emit(turn.number, turn.round, (TurnParked(phase.waiting()[0].request_id),))
    return Reaction(msgspec.structs.replace(record, turn=parked), (event,))


def _on_control(address: str, record: AgentRecord, wake: Stop | Pause | Resume) -> Reaction:
    match wake:
        case Stop():
            return _on_stop(address, record, wake)
        case Pause():
            return on_pause(record, wake)
        case Resume():
            return _on_resume(address, record, wake)


def stops(stop: Stop, turn: int) -> bool:
    """Whether `stop` is for turn `turn` (the one in progress): a stop naming no turn is
    for whichever is in progress, one naming another turn is for none. `turn` 0 (a running
    wake named before its turn was kept) is taken to be the one named."""
    return not stop.turn or not turn or stop.turn == turn


def _on_stop(address: str, record: AgentRecord, stop: Stop) -> Reaction:
    """Stop a turn that waits or is parked. (A running turn is stopped by cancelling its
    invocation: see the `stop` handler.)"""
    if record.turn is None or not stops(stop, record.turn.number):
        body = (
            StopRefused("other_turn", NOT_THAT_TURN.format(turn=stop.turn))
            if record.turn
            else StopRefused(message=NOTHING_TO_STOP)
        )
        why = body.message
        refused = Emit(*where(record), (body,))
        return Reaction(record, (refused,), note=why)
    ended = _end(address, record, record.turn, "stopped", STOPPED)
    return _then(ended, _next(address, ended.record))


def _on_resume(address: str, record: AgentRecord, resume: Resume) -> Reaction:
    """The held turn goes on if it can (it stopped at a round boundary, its children all
    reported, or its answer came), else what queued while paused starts."""
    if not record.paused:
        return Reaction(record, note=NOT_PAUSED)
    resumed = msgspec.structs.replace(record, paused=False)
    emitted = Reaction(resumed, (Emit(*where(record), (AgentResumed(resume.by),)),))
    turn = resumed.turn
    if turn is None:
        return _then(emitted, _next(address, resumed))
    if can_go_on(turn):
        return _then(emitted, Reaction(resumed, (Drive(turn),)))
    return emitted


def _then(first: Reaction, second: Reaction) -> Reaction:
    """`first`'s effects, then `second`'s (which was computed from `first.record`)."""
    reply = second.reply if second.reply is not None else first.reply
    return Reaction(
        second.record, (*first.effects, *second.effects), reply, second.note or first.note
    )
