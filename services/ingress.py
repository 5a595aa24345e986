"""A small client for Restate ingress: wake agents and read their timelines."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from schemas.events import AgentStatus, StopAnswer, TimelinePage, TimelineQuery, WakeResult
from schemas.spec import AgentSpec
from schemas.wake import Message, Wake, WakeEnvelope


class IngressError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


READ_TIMEOUT = 30.0
"""Seconds a read (status, timeline) may take: Restate holds a call to an endpoint that is
down until its own timeout, and a reader should hear that sooner."""


class Ingress:
    def __init__(self, url: str, *, timeout: float = 600.0) -> None:
        self._http = httpx.Client(base_url=url, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def wake(self, address: str, wake: Wake, idempotency_key: str | None = None) -> WakeResult:
        """Wake the agent and wait until the wake's work is done."""
        body = msgspec.json.encode(WakeEnvelope(wake))
        raw = self._post(f"/Agent/{address}/wake", body, idempotency_key)
        return msgspec.json.decode(raw, type=WakeResult)

    def send(self, address: str, wake: Wake, idempotency_key: str | None = None) -> str:
        """Wake the agent without waiting; returns the invocation id."""
        body = msgspec.json.encode(WakeEnvelope(wake))
        raw = self._post(f"/Agent/{address}/wake/send", body, idempotency_key)
        answer: dict[str, Any] = msgspec.json.decode(raw)
        return str(answer["invocationId"])

    def message(
        self, address: str, text: str, spec: AgentSpec | None = None, key: str | None = None
    ) -> WakeResult:
        return self.wake(address, Message(text, spec=spec), key)

    def stop(self, address: str) -> StopAnswer:
        raw = self._post(f"/Agent/{address}/stop", b"", None)
        return msgspec.json.decode(raw, type=StopAnswer)

    def status(self, address: str) -> AgentStatus:
        raw = self._post(f"/Agent/{address}/status", b"", None, READ_TIMEOUT)
        return msgspec.json.decode(raw, type=AgentStatus)

    def timeline(self, address: str, after_seq: int = 0, limit: int = 100) -> TimelinePage:
        body = msgspec.json.encode(TimelineQuery(after_seq, limit))
        raw = self._post(f"/Agent/{address}/timeline", body, None, READ_TIMEOUT)
        return msgspec.json.decode(raw, type=TimelinePage)

    def call(self, path: str, body: bytes = b"") -> bytes:
        """Any handler, by path: `/Service/key/handler`."""
        return self._post(path, body, None)

    def _post(
        self, path: str, body: bytes, idempotency_key: str | None, timeout: float | None = None
    ) -> bytes:
        headers = {"content-type": "application/json"} if body else {}
        if idempotency_key:
            headers["idempotency-key"] = idempotency_key
        limit = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        response = self._http.post(path, content=body, headers=headers, timeout=limit)
        if response.status_code >= 400:
            raise IngressError(response.status_code, _message(response))
        return response.content


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", response.text))
    except ValueError:
        return response.text
