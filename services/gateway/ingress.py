"""The gateway's async client for Restate ingress: the only way it reaches agents and
tenants. It sends messages one-way and publishes specs; it never writes state itself."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
import msgspec

from schemas.catalog import ApiKey, KeyRef, Keys, PublishedSpec, SpecAnswer, SpecQuery
from schemas.events import Approvals, StopAnswer
from schemas.spec import AgentSpec
from schemas.wake import Approval, Message, WakeEnvelope
from services.gateway.errors import ApiError

T = TypeVar("T")


class IngressUnavailableError(ApiError):
    def __init__(self, reason: str) -> None:
        super().__init__(503, f"Restate ingress cannot take the request right now ({reason})")


class AsyncIngress:
    """The HTTP client is made on first use, on the event loop that serves requests."""

    def __init__(
        self, url: str, transport: httpx.AsyncBaseTransport | None = None, timeout: float = 30.0
    ) -> None:
        self.url = url
        self._transport = transport
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None

    @property
    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.url, transport=self._transport, timeout=self._timeout
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send_message(
        self, address: str, text: str, kind: str | None, idempotency_key: str | None
    ) -> str:
        """One-way: returns the invocation id as soon as Restate has the message."""
        body = msgspec.json.encode(WakeEnvelope(Message(text, kind=kind)))
        raw = await self._post(f"/Agent/{address}/wake/send", body, idempotency_key)
        return _invocation_id(raw)

    async def approvals(self, address: str) -> Approvals:
        return _decode(await self._post(f"/Agent/{address}/approvals", b"", None), Approvals)

    async def answer(self, address: str, answer: Approval) -> str:
        """One-way, keyed by the request: answering twice sends one answer."""
        body = msgspec.json.encode(WakeEnvelope(answer))
        key = f"approval {answer.request_id}"
        raw = await self._post(f"/Agent/{address}/wake/send", body, key)
        return _invocation_id(raw)

    async def stop(self, address: str) -> StopAnswer:
        return _decode(await self._post(f"/Agent/{address}/stop", b"", None), StopAnswer)

    async def publish(self, tenant: str, spec: AgentSpec) -> PublishedSpec:
        raw = await self._post(f"/Tenant/{tenant}/publish", msgspec.json.encode(spec), None)
        return _decode(raw, PublishedSpec)

    async def latest_spec(self, tenant: str, kind: str) -> AgentSpec | None:
        """The tenant object's own answer, for when the projection has not caught up."""
        raw = await self._post(f"/Tenant/{tenant}/spec", msgspec.json.encode(SpecQuery(kind)), None)
        return _decode(raw, SpecAnswer).spec

    async def add_key(self, key: ApiKey) -> ApiKey:
        raw = await self._post(f"/Tenant/{key.tenant}/add_key", msgspec.json.encode(key), None)
        return _decode(raw, ApiKey)

    async def keys(self, tenant: str) -> Keys:
        return _decode(await self._post(f"/Tenant/{tenant}/keys", b"", None), Keys)

    async def revoke_key(self, tenant: str, key_id: str) -> ApiKey:
        raw = await self._post(
            f"/Tenant/{tenant}/revoke_key", msgspec.json.encode(KeyRef(key_id)), None
        )
        return _decode(raw, ApiKey)

    async def healthy(self) -> str:
        """'ok', or a sentence saying why ingress does not answer."""
        try:
            response = await self._http.get("/restate/health", timeout=3.0)
        except httpx.HTTPError as error:
            return f"not reachable at {self.url} ({error.__class__.__name__})"
        if response.status_code != httpx.codes.OK:
            return f"answered {response.status_code} to its health check"
        return "ok"

    async def _post(self, path: str, body: bytes, idempotency_key: str | None) -> bytes:
        headers = {"content-type": "application/json"} if body else {}
        if idempotency_key:
            headers["idempotency-key"] = idempotency_key
        try:
            response = await self._http.post(path, content=body, headers=headers)
        except httpx.HTTPError as error:
            raise IngressUnavailableError(f"{error.__class__.__name__}: {error}") from error
        if response.status_code >= 400:
            raise _error(response)
        return response.content


def _invocation_id(raw: bytes) -> str:
    answer: Any = msgspec.json.decode(raw)
    if not isinstance(answer, dict) or "invocationId" not in answer:
        raise IngressUnavailableError("it answered a send without an invocation id")
    return str(answer["invocationId"])


def _decode(raw: bytes, type_: type[T]) -> T:
    try:
        return msgspec.json.decode(raw, type=type_)
    except msgspec.DecodeError as error:
        raise IngressUnavailableError(f"it answered something unexpected: {error}") from error


def _error(response: httpx.Response) -> ApiError:
    """A handler's terminal 4xx is the client's to fix; anything else is ours."""
    try:
        answer: Any = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        answer = {}
    message = str(answer.get("message") or response.text or response.reason_phrase)
    from_handler = answer.get("source") != "ingress"
    if 400 <= response.status_code < 500 and from_handler:
        return ApiError(response.status_code, message)
    return IngressUnavailableError(f"{response.status_code}: {message}")
