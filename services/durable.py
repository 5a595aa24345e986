"""Helpers for code running inside a Restate handler: calls and sends by contract, and a
journaled step that stops its work when the invocation is cancelled.

Code already running in a `ctx.run` step is not interrupted by a cancellation: Restate
raises it at the handler's next `await`. A step that would run for long (a generation, a
command) takes a `cancelled` waiter instead, and stops when it completes (a cancellation
seen by the handler) or when its task is cancelled (the SDK does so when the attempt
ends: abort, retry, shutdown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Generic, TypeVar

import msgspec
import restate

from schemas.wake import Arrival, Message, WakeEnvelope, acts_on_a_running_turn
from services.contracts import ARRIVED, WAKE, Handler

T = TypeVar("T")
In = TypeVar("In")
Out = TypeVar("Out")
Cancelled = Callable[[], Awaitable[object]]
"""Completes when the step's work should stop."""
CANCELLED = 409
"""The status of the TerminalError Restate raises in a cancelled invocation."""
NO_JOURNAL = timedelta(0)
"""A journal retention: Restate drops an invocation's journal (its input, every step's
result) as soon as it finishes. restate-server keeps finished journals for a day unless a
service or handler says otherwise (`default-journal-retention`): the objects and handlers
whose input is a document's or a memory's text say this, so what a deletion or an erasure
removes is in no journal afterwards."""


def step_options(type_: type[T], max_attempts: int | None = None) -> restate.RunOptions[T]:
    """A step's options, with the SDK's msgspec serde for the result: it writes a struct's
    bytes as the SDK's default serde does, and each reads what the other wrote."""
    serde: restate.serde.Serde[T] = restate.serde.MsgspecJsonSerde(type_)  # type: ignore[no-untyped-call]
    return restate.RunOptions(serde=serde, max_attempts=max_attempts)


class StepRefusedError(Exception):
    """The step cannot succeed however often it is tried; it fails with `status`."""

    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status


async def cancellable_step(
    ctx: restate.Context,
    name: str,
    work: Callable[[Cancelled], Awaitable[T]],
    type_hint: type[T],
    max_attempts: int = 3,
) -> T:
    """When the attempt ends, the SDK cancels the task running the step, so `work` sees a
    `CancelledError`; `cancelled` covers the other case, a cancellation the handler sees
    while the step runs. One future serves every wait on it (no task per wait)."""
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def run() -> T:
        try:
            return await work(lambda: stop)
        except StepRefusedError as error:
            raise restate.TerminalError(str(error), status_code=error.status) from error

    try:
        return await ctx.run_typed(name, run, step_options(type_hint, max_attempts))
    except restate.TerminalError:
        if not stop.done():
            stop.set_result(None)
        raise


async def call(
    ctx: restate.Context, handler: Handler[In, Out], value: In, *, key: str | None = None
) -> Out:
    """A durable request-response call from inside a handler."""
    raw = await ctx.generic_call(
        handler.service, handler.name, handler.encode(value), key=key if handler.keyed else None
    )
    return handler.decode(raw)


class Asked(Generic[Out]):
    """A request-response call made already, whose answer is awaited later (`ask`)."""

    def __init__(self, handler: Handler[Any, Out], raw: Awaitable[bytes]) -> None:
        self._handler = handler
        self._raw = raw

    async def answer(self) -> Out:
        return self._handler.decode(await self._raw)


def ask(
    ctx: restate.Context, handler: Handler[In, Out], value: In, *, key: str | None = None
) -> Asked[Out]:
    """`call`, made at once and awaited later: the callee works while the handler does."""
    raw = ctx.generic_call(
        handler.service, handler.name, handler.encode(value), key=key if handler.keyed else None
    )
    return Asked(handler, raw)


def send(
    ctx: restate.Context,
    handler: Handler[In, Out],
    value: In,
    *,
    key: str | None = None,
    idempotency_key: str | None = None,
    delay: timedelta | None = None,
) -> None:
    """A durable one-way send from inside a handler: returns at once."""
    ctx.generic_send(
        handler.service,
        handler.name,
        handler.encode(value),
        key=key if handler.keyed else None,
        idempotency_key=idempotency_key,
        send_delay=delay,
    )


async def deliver(
    ctx: restate.Context,
    address: str,
    message: Message,
    *,
    idempotency_key: str | None = None,
    delay: timedelta | None = None,
) -> None:
    """Send a message to an agent from inside a handler (a schedule's fire, a webhook's
    delivery): the one way a message reaches an agent, whatever its `while_busy`. It
    travels to the agent's `wake`, in order with everything else sent to it; every one
    but a reject also tells the agent's `arrived` handler, which reaches a turn running
    now (`schemas.wake.acts_on_a_running_turn`)."""
    if not message.id:
        message = msgspec.structs.replace(message, id=f"m{ctx.uuid().hex[:24]}")
    sent = ctx.generic_send(
        WAKE.service,
        WAKE.name,
        WAKE.encode(WakeEnvelope(message)),
        key=address,
        idempotency_key=idempotency_key,
        send_delay=delay,
    )
    if acts_on_a_running_turn(message):
        arrival = Arrival(message, await sent.invocation_id())
        send(ctx, ARRIVED, arrival, key=address, delay=delay)


async def rang(bell: Any, done: Any) -> bool:
    """Whether `bell` has completed, checked beside `done`, a future that has completed
    already: `restate.wait_completed` answers at once with the completed ones, so this
    journals nothing and waits for nothing (an in-memory context's futures are asyncio's,
    `services/agent/inline.py`)."""
    if isinstance(bell, asyncio.Future):
        return bell.done()
    completed, _ = await restate.wait_completed(bell, done)
    return bell in completed


async def together(*futures: Any) -> None:
    """Wait for every future at once: `restate.gather` for the SDK's futures (one round
    trip for all of them), asyncio's for those of an in-memory context
    (`services/agent/inline.py`)."""
    if futures and isinstance(futures[0], asyncio.Future):
        await asyncio.gather(*futures)
    else:
        await restate.gather(*futures)


async def take_slot(
    ctx: restate.ObjectContext, name: str, most: int, refusal: Callable[[int], str]
) -> None:
    """Count one more of what the state value `name` counts, or refuse (429) with
    `refusal(count)` once it holds `most`."""
    count = await ctx.get(name, type_hint=int) or 0
    if count >= most:
        raise restate.TerminalError(refusal(count), 429)
    ctx.set(name, count + 1)
