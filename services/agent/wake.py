"""The wake's driver: loads the record, feeds inputs to the machine, performs effects.

Per wake: the clock and the record (with its copy of the verbatim history) read in one
round trip; `running` set when a turn runs; the record written once at the end (its copy
renewed when a segment was added or a fold moved on; a segment gets a key of its own only
once a fold moves past it); the timeline's events handed to the projection as steps
return, written as one chunk at the end (`Timeline`), and a last write, not journaled,
that makes sure the projection holds them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import msgspec
import restate

from schemas.address import parse_address
from schemas.events import AgentStatus, WakeResult
from schemas.harness import TurnState
from schemas.state import AgentRecord, TimelineMark
from schemas.tenant import SpecQuery
from schemas.wake import Wake, WakeEnvelope
from services.agent.clock import Clock
from services.agent.machine import (
    Drive,
    Effect,
    Emit,
    FindSpec,
    Input,
    Refuse,
    Remember,
    SendWake,
    SpecFound,
    TurnStopped,
    react,
    state_of,
)
from services.agent.observers import Observer
from services.agent.rounds import LocalModel, Rounds, definitions
from services.agent.store import Store
from services.agent.timeline import LiveProjection, Timeline
from services.contracts import LATEST_SPEC, WAKE
from services.durable import CANCELLED, call, send
from services.harness.loop import TurnInput
from services.tools.registry import ToolRegistry


class WakeDriver:
    def __init__(
        self,
        ctx: restate.ObjectContext,
        address: str,
        tools: ToolRegistry,
        observers: Sequence[Observer],
        model: LocalModel | None,
        *,
        live: LiveProjection | None = None,
    ) -> None:
        self._ctx = ctx
        self._address = address
        self._tools = tools
        self._observers = observers
        self._store = Store(ctx)
        self._clock = Clock(ctx)
        self._model = model
        self._live = live

    async def run(self, wake: Wake) -> WakeResult:
        started = self._clock.read_step()
        record = await self._store.record(started)  # the clock is read with the record
        self._clock.saw(await started)
        self._timeline = Timeline(
            self._ctx, self._store, self._address, record.timeline, self._observers, live=self._live
        )
        self._rounds = Rounds(
            self._ctx,
            self._address,
            timeline=self._timeline,
            store=self._store,
            clock=self._clock,
            tools=self._tools,
            model=self._model,
        )
        inputs: deque[Input] = deque([wake])
        reply, note = "", ""
        while inputs:
            reaction = react(self._address, record, inputs.popleft())
            record = reaction.record
            reply = reaction.reply if reaction.reply is not None else reply
            note = reaction.note or note
            for effect in reaction.effects:
                follow = await self._perform(effect, record)
                if follow is not None:
                    inputs.append(follow)
        record = await self._finish(record)
        return WakeResult(
            status(self._address, record, record.timeline, running=False), reply, note
        )

    async def _perform(self, effect: Effect, record: AgentRecord) -> Input | None:
        match effect:
            case Emit(turn=turn, round=round_, bodies=bodies):
                self._timeline.add(turn, round_, *bodies)
            case SendWake(address=address, wake=wake, key=key, delay=delay):
                send(
                    self._ctx,
                    WAKE,
                    WakeEnvelope(wake),
                    key=address,
                    idempotency_key=key,
                    delay=delay,
                )
            case Remember(index=index, segment=segment):
                self._store.write_segment(index, segment)
            case FindSpec(message=message, kind=kind, direct=direct):
                tenant = parse_address(self._address).tenant
                answer = await call(self._ctx, LATEST_SPEC, SpecQuery(kind), key=tenant)
                return SpecFound(message, answer.spec, direct)
            case Drive(turn=turn):
                return await self._drive(turn, record)
            case Refuse(status=status_code, sentence=sentence):
                await self._finish(record)
                raise restate.TerminalError(sentence, status_code=status_code)
        return None

    async def _drive(self, turn: TurnState, record: AgentRecord) -> Input:
        self._store.set_running(self._ctx.request().id)
        recent = await self._store.recent(record.context)
        given = TurnInput(self._address, turn, recent, definitions(self._tools), record.context)
        try:
            return await self._rounds.drive(turn, given, record.ledger)
        except restate.TerminalError as error:
            if error.status_code != CANCELLED:
                raise
            return TurnStopped(self._rounds.stopped(), self._rounds.ledger, self._rounds.context)

    async def _finish(self, record: AgentRecord) -> AgentRecord:
        """Flush what is left of the timeline and write the record (if it changed): the
        wake's end. Returns the record as written."""
        await self._timeline.flush(state_of(record.turn), self._clock.read, last=True)
        if record.timeline != self._timeline.mark:
            record = msgspec.structs.replace(record, timeline=self._timeline.mark)
        await self._store.finish(record)
        return record


def status(address: str, record: AgentRecord, mark: TimelineMark, *, running: bool) -> AgentStatus:
    """The agent's status, its state derived from the turn's phase by `state_of`."""
    return AgentStatus(
        address=address,
        state="running" if running else state_of(record.turn),
        turn=record.turns,
        last_seq=mark.last_seq,
        last_outcome=record.last_outcome,
        queued=len(record.queue),
        tokens_day=record.ledger.day,
        tokens_used=record.ledger.day_tokens,
    )
