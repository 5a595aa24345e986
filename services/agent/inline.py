"""An in-memory stand-in for the part of `restate.ObjectContext` the agent's driver uses:
the in-process tier of the driver's tests and the wake benchmark (`bench/wake.py`) run
whole wakes on it, without restate-server.

A step runs when it is made (a task), and its result goes through its serde as it would
through a journal; object state is a dict of serialised values; one-way sends are
recorded (`sent`) for the caller to deliver; a durable call goes to the handler given
for it in `calls` (a tenant's `Lifecycle.standing` answers that it was never erased,
unless `calls` says otherwise). `cancel()` makes the next step the wake awaits raise the
`TerminalError` Restate raises in a cancelled invocation.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import msgspec
import restate
from restate.serde import DefaultSerde, Serde

from schemas.lifecycle import Standing
from services.contracts import STANDING
from services.durable import CANCELLED

Call = Callable[[bytes], Awaitable[bytes]]


async def _standing(_: bytes) -> bytes:
    return msgspec.json.encode(Standing())


@dataclass(frozen=True)
class Sent:
    service: str
    handler: str
    key: str | None
    arg: bytes
    idempotency_key: str | None
    delay: timedelta | None


@dataclass
class Request:
    id: str
    attempt_finished_event: asyncio.Event = field(default_factory=asyncio.Event)


class InlineContext:
    def __init__(
        self,
        key: str,
        state: dict[str, bytes],
        invocation: str,
        calls: dict[tuple[str, str], Call] | None = None,
    ) -> None:
        self._key, self.state, self._request = key, state, Request(invocation)
        self._calls = {(STANDING.service, STANDING.name): _standing, **(calls or {})}
        self.sent: list[Sent] = []
        self.awakeables: dict[str, asyncio.Future[Any]] = {}
        self._cancelled = False

    def key(self) -> str:
        return self._key

    def request(self) -> Request:
        return self._request

    def cancel(self) -> None:
        self._cancelled = True

    def run_typed(
        self,
        name: str,
        action: Callable[..., Any],
        options: restate.RunOptions[Any] | None = None,
        /,
        *args: Any,
        **kwargs: Any,
    ) -> asyncio.Future[Any]:
        options = options or restate.RunOptions()
        serde = _serde(options.serde, options.type_hint)

        async def step() -> Any:
            self._check()
            result = action(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return serde.deserialize(serde.serialize(result))

        return asyncio.ensure_future(step())

    def get(
        self, name: str, serde: Serde[Any] | None = None, type_hint: type | None = None
    ) -> asyncio.Future[Any]:
        chosen = _serde(serde or DefaultSerde(), type_hint)
        stored = self.state.get(name)
        return _done(None if stored is None else chosen.deserialize(stored))

    def set(self, name: str, value: Any, serde: Serde[Any] | None = None) -> None:
        self.state[name] = _serde(serde or DefaultSerde(), type(value)).serialize(value)

    def clear(self, name: str) -> None:
        self.state.pop(name, None)

    def generic_send(
        self,
        service: str,
        handler: str,
        arg: bytes,
        key: str | None = None,
        *,
        idempotency_key: str | None = None,
        send_delay: timedelta | None = None,
    ) -> None:
        self.sent.append(Sent(service, handler, key, arg, idempotency_key, send_delay))

    def generic_call(
        self, service: str, handler: str, arg: bytes, key: str | None = None
    ) -> asyncio.Future[bytes]:
        call = self._calls.get((service, handler))
        if call is None:
            raise restate.TerminalError(f"{service}/{handler} is not served here", 404)

        async def invoke() -> bytes:
            self._check()
            return await call(arg)

        return asyncio.ensure_future(invoke())

    def awakeable(
        self, serde: Serde[Any] | None = None, type_hint: type | None = None
    ) -> tuple[str, asyncio.Future[Any]]:
        """A named future; `resolve` completes it, as a shared handler's resolve would."""
        name = f"awakeable-{len(self.awakeables)}"
        self.awakeables[name] = asyncio.get_running_loop().create_future()
        return name, self.awakeables[name]

    def resolve(self, name: str, value: bytes) -> None:
        self.awakeables[name].set_result(value)

    def _check(self) -> None:
        if self._cancelled:
            raise restate.TerminalError("cancelled", status_code=CANCELLED)


def _serde(serde: Serde[Any], hint: Any) -> Serde[Any]:
    return serde.with_maybe_type(hint or None) if isinstance(serde, DefaultSerde) else serde


def _done(value: Any) -> asyncio.Future[Any]:
    future = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future
