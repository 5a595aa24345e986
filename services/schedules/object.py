"""The `Schedules` virtual object, keyed by an agent's address: that agent's schedules.

Each schedule has exactly one pending fire: a delayed one-way `fire` the object sent
itself. A fire sends the agent its message (or records a skip), then sends the next one,
planned from the real time of this fire: a fire that comes late, because the service was
down, runs once and stands for every fire it missed. Nothing polls.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import restate

from schemas.address import InvalidAddressError, parse_address, tenant_of
from schemas.schedule import Schedule, ScheduleList, ScheduleRef, ScheduleSpec, Tick
from schemas.wake import Fired, Message, ScheduleSkip, WakeEnvelope
from services.contracts import (
    ADD_SCHEDULE,
    FIRE,
    GIVE_SCHEDULE,
    LIST_SCHEDULES,
    REMOVE_SCHEDULE,
    SCHEDULES,
    STATUS,
    TAKE_SCHEDULE,
    WAKE,
    Empty,
)
from services.durable import call, deliver, send
from services.schedules.timing import Rules, ScheduleError, check, missed, next_fire
from services.settings import settings

STATE = "schedules"

schedules = restate.VirtualObject(
    SCHEDULES, description="An agent's schedules: messages it is sent on a clock."
)


def rules() -> Rules:
    config = settings()
    return Rules(config.schedule_min_seconds, config.agent_schedules)


@schedules.handler(name=ADD_SCHEDULE.name)
async def add(ctx: restate.ObjectContext, spec: ScheduleSpec) -> Schedule:
    address = _address(ctx.key())
    stored = await _stored(ctx)
    most = rules()
    if len(stored.schedules) >= most.per_agent:
        raise restate.TerminalError(
            f"Agent {address} has {len(stored.schedules)} schedules, the most one agent may "
            "have (TEASPILL_AGENT_SCHEDULES): remove one first.",
            429,
        )
    now = await _now(ctx)
    try:
        first = check(spec, now, most)
    except ScheduleError as error:
        raise restate.TerminalError(str(error), 422) from error
    await call(ctx, TAKE_SCHEDULE, Empty(), key=tenant_of(address))
    made = Schedule(f"s{stored.made + 1}", spec, now, first)
    ctx.set(STATE, ScheduleList((*stored.schedules, made), stored.made + 1))
    _plan(ctx, made.id, first, now)
    return made


@schedules.handler(name=REMOVE_SCHEDULE.name)
async def remove(ctx: restate.ObjectContext, ref: ScheduleRef) -> Schedule:
    """The pending fire stays with Restate, and does nothing when it comes."""
    address = _address(ctx.key())
    stored = await _stored(ctx)
    found = _find(stored, ref.id)
    if found is None:
        raise restate.TerminalError(f"Agent {address} has no schedule {ref.id!r}.", 404)
    _keep(ctx, stored, tuple(s for s in stored.schedules if s.id != ref.id))
    send(ctx, GIVE_SCHEDULE, Empty(), key=tenant_of(address))
    return found


@schedules.handler(name=LIST_SCHEDULES.name, kind="shared")
async def listing(ctx: restate.ObjectSharedContext) -> ScheduleList:
    _address(ctx.key())
    return await _stored(ctx)


@schedules.handler(name=FIRE.name)
async def fire(ctx: restate.ObjectContext, tick: Tick) -> Empty:
    stored = await _stored(ctx)
    found = _find(stored, tick.id)
    if found is None or found.next_at != tick.planned:
        return Empty()  # removed since, or a fire planned before a newer one
    now = await _now(ctx)
    due = max(now, tick.planned)
    if found.spec.while_busy == "skip" and await _busy(ctx):
        send(ctx, WAKE, WakeEnvelope(ScheduleSkip(found.id, tick.planned)), key=ctx.key())
        done = msgspec.structs.replace(found, skipped=found.skipped + 1)
    else:
        lost = missed(found.spec.when, found.created, tick.planned, due)
        await _send_message(ctx, found, Fired(found.id, tick.planned, lost, now))
        done = msgspec.structs.replace(found, fired=found.fired + 1, last_fired=now)
    upcoming = next_fire(found.spec.when, found.created, due)
    done = msgspec.structs.replace(done, next_at=upcoming)
    if upcoming is None:
        _keep(ctx, stored, tuple(s for s in stored.schedules if s.id != found.id))
        send(ctx, GIVE_SCHEDULE, Empty(), key=tenant_of(ctx.key()))
    else:
        _keep(ctx, stored, tuple(done if s.id == found.id else s for s in stored.schedules))
        _plan(ctx, found.id, upcoming, now)
    return Empty()


async def _send_message(ctx: restate.ObjectContext, schedule: Schedule, fired: Fired) -> None:
    spec = schedule.spec
    message_id = f"{schedule.id}@{fired.planned.isoformat()}"
    # A skipping schedule found the agent idle; a turn that started since comes first.
    policy = "queue" if spec.while_busy == "skip" else spec.while_busy
    message = Message(spec.text, kind=spec.kind, id=message_id, schedule=fired, while_busy=policy)
    await deliver(ctx, ctx.key(), message)


async def _busy(ctx: restate.ObjectContext) -> bool:
    """Whether the agent has a turn in progress: its own status, read beside any wake."""
    status = await call(ctx, STATUS, Empty(), key=ctx.key())
    return status.state != "idle"


def _plan(ctx: restate.ObjectContext, schedule: str, at: datetime, now: datetime) -> None:
    delay = max(at - now, timedelta(0))
    send(ctx, FIRE, Tick(schedule, at), key=ctx.key(), delay=delay)


def _keep(ctx: restate.ObjectContext, stored: ScheduleList, kept: tuple[Schedule, ...]) -> None:
    ctx.set(STATE, ScheduleList(kept, stored.made))


def _find(stored: ScheduleList, schedule: str) -> Schedule | None:
    return next((s for s in stored.schedules if s.id == schedule), None)


async def _stored(ctx: restate.ObjectSharedContext | restate.ObjectContext) -> ScheduleList:
    return await ctx.get(STATE, type_hint=ScheduleList) or ScheduleList()


async def _now(ctx: restate.ObjectContext) -> datetime:
    return datetime.fromtimestamp(await ctx.time(), UTC)


def _address(key: str) -> str:
    try:
        return str(parse_address(key))
    except InvalidAddressError as error:
        raise restate.TerminalError(str(error), status_code=400) from error
