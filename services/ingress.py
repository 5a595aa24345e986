"""The one client for Restate ingress, sync (`Ingress`) and async (`AsyncIngress`).

Both take a handler declared in `services.contracts`, so a call's path, input and output
types come from one place. The CLI, the gateway, rebuild, the tests and the benchmarks
reach Restate through these.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
import msgspec

from schemas.events import AgentStatus, StopAnswer, TimelinePage, TimelineQuery, WakeResult
from schemas.spec import AgentSpec
from schemas.wake import Arrival, Message, Stop, Wake, WakeEnvelope, acts_on_a_running_turn
from services.contracts import ARRIVED, STATUS, STOP, TIMELINE, WAKE, Empty, Handler
from services.observe import tracing

In = TypeVar("In")
Out = TypeVar("Out")


class IngressError(Exception):
    """Restate (or the handler) answered with an error status.

    `from_handler` is False when ingress itself refused (e.g. an unknown service)."""

    def __init__(self, status: int, message: str, *, from_handler: bool = True) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.from_handler = from_handler


READ_TIMEOUT = 30.0
"""Seconds a read (status, timeline) may take: Restate holds a call to an endpoint that is
down until its own timeout, and a reader should hear that sooner."""


class Ingress:
    def __init__(
        self,
        url: str,
        *,
        timeout: float = 600.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url
        self._http = httpx.Client(base_url=url, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def call(
        self,
        handler: Handler[In, Out],
        value: In,
        key: str | None = None,
        *,
        patience: float | None = None,
    ) -> Out:
        """Call and wait for the handler's answer (`patience`: seconds, if not the
        client's timeout)."""
        raw = self._post(handler.path(key), handler.encode(value), None, patience)
        return handler.decode(raw)

    def send(
        self,
        handler: Handler[In, Out],
        value: In,
        key: str | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """One-way: returns the invocation id as soon as Restate has the request."""
        raw = self._post(f"{handler.path(key)}/send", handler.encode(value), idempotency_key)
        return invocation_id(raw)

    def post(self, path: str, body: bytes = b"") -> bytes:
        """Any handler by its path: for what a contract cannot express (a body a handler's
        type would refuse to encode, in tests of what the handler does with it)."""
        return self._post(path, body, None)

    def wake(self, address: str, wake: Wake, idempotency_key: str | None = None) -> WakeResult:
        """Wake the agent and wait until the wake's work is done."""
        raw = self._post(WAKE.path(address), WAKE.encode(WakeEnvelope(wake)), idempotency_key)
        return WAKE.decode(raw)

    def send_wake(self, address: str, wake: Wake, idempotency_key: str | None = None) -> str:
        """Wake the agent without waiting; returns the invocation id."""
        return self.send(WAKE, WakeEnvelope(wake), address, idempotency_key)

    def send_message(
        self, address: str, message: Message, idempotency_key: str | None = None
    ) -> str:
        """One-way, as every sender sends a message: to the agent's `wake`, and, for every
        one but a reject, to its `arrived` handler too (which reaches a turn running
        now). Returns the invocation id of the wake."""
        invocation = self.send_wake(address, message, idempotency_key)
        if acts_on_a_running_turn(message):
            arrival = Arrival(message, invocation)
            self.send(ARRIVED, arrival, address, f"arrived {invocation}")
        return invocation

    def attach(self, invocation: str, patience: float = 120.0) -> WakeResult:
        """Wait for the wake `invocation` (one sent one-way) to end: its result."""
        response = self._http.get(f"/restate/invocation/{invocation}/attach", timeout=patience)
        if response.status_code >= 400:
            raise error_of(response)
        return WAKE.decode(response.content)

    def message(
        self, address: str, text: str, spec: AgentSpec | None = None, key: str | None = None
    ) -> WakeResult:
        return self.wake(address, Message(text, spec=spec), key)

    def stop(self, address: str, turn: int = 0) -> StopAnswer:
        """`turn`: stop only that turn (0: whichever is in progress)."""
        return self.call(STOP, Stop(turn=turn), address)

    def send_stop(self, address: str) -> str:
        """One-way to the shared `stop` handler; the outcome lands on the timeline."""
        return self.send(STOP, Stop(), address)

    def status(self, address: str) -> AgentStatus:
        return self.call(STATUS, Empty(), address, patience=READ_TIMEOUT)

    def timeline(self, address: str, after_seq: int = 0, limit: int = 100) -> TimelinePage:
        query = TimelineQuery(after_seq, limit)
        return self.call(TIMELINE, query, address, patience=READ_TIMEOUT)

    def _post(
        self, path: str, body: bytes, idempotency_key: str | None, patience: float | None = None
    ) -> bytes:
        limit = httpx.USE_CLIENT_DEFAULT if patience is None else patience
        response = self._http.post(
            path, content=body, headers=headers(body, idempotency_key), timeout=limit
        )
        if response.status_code >= 400:
            raise error_of(response)
        return response.content


class AsyncIngress:
    """The HTTP client is made on first use, on the event loop that serves requests."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self._timeout = timeout
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.url, transport=self._transport, timeout=self._timeout
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def call(
        self,
        handler: Handler[In, Out],
        value: In,
        key: str | None = None,
        *,
        patience: float | None = None,
        idempotency_key: str | None = None,
    ) -> Out:
        """`patience`, when given, replaces the client's timeout for this call; with
        `idempotency_key`, a retry is the same invocation and gets its answer."""
        path, body = handler.path(key), handler.encode(value)
        raw = await self._post(path, body, idempotency_key, patience)
        return handler.decode(raw)

    async def send(
        self,
        handler: Handler[In, Out],
        value: In,
        key: str | None = None,
        idempotency_key: str | None = None,
        patience: float | None = None,
    ) -> str:
        path, body = f"{handler.path(key)}/send", handler.encode(value)
        return invocation_id(await self._post(path, body, idempotency_key, patience))

    async def send_once(
        self,
        handler: Handler[In, Out],
        value: In,
        key: str | None,
        idempotency_key: str,
        patience: float | None = None,
    ) -> tuple[str, bool]:
        """A one-way send, and whether it is the first with `idempotency_key`: Restate
        answers a repeat `PreviouslyAccepted` (with the first one's invocation) and runs
        nothing for it."""
        path, body = f"{handler.path(key)}/send", handler.encode(value)
        raw = await self._post(path, body, idempotency_key, patience)
        return invocation_id(raw), first_send(raw)

    async def _post(
        self, path: str, body: bytes, idempotency_key: str | None, patience: float | None
    ) -> bytes:
        response = await self.http.post(
            path,
            content=body,
            headers=headers(body, idempotency_key),
            timeout=patience if patience is not None else self._timeout,
        )
        if response.status_code >= 400:
            raise error_of(response)
        return response.content


def headers(body: bytes, idempotency_key: str | None) -> dict[str, str]:
    found = {"content-type": "application/json"} if body else {}
    if idempotency_key:
        found["idempotency-key"] = idempotency_key
    tracing.inject(found)  # Restate's ingress continues the caller's trace
    return found


def invocation_id(raw: bytes) -> str:
    try:
        answer: Any = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        answer = None
    if not isinstance(answer, dict) or "invocationId" not in answer:
        raise IngressError(502, "Restate answered a send without an invocation id")
    return str(answer["invocationId"])


def first_send(raw: bytes) -> bool:
    """Whether Restate took a send as new (`Accepted`) rather than as a repeat of one it
    holds under the same idempotency key (`PreviouslyAccepted`)."""
    answer: Any = msgspec.json.decode(raw)
    return not (isinstance(answer, dict) and answer.get("status") == "PreviouslyAccepted")


def error_of(response: httpx.Response) -> IngressError:
    try:
        answer: Any = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        answer = {}
    message = str(answer.get("message") or response.text or response.reason_phrase)
    from_handler = answer.get("source") != "ingress"
    return IngressError(response.status_code, message, from_handler=from_handler)
