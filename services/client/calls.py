"""Each request the client makes, described once as plain data (sans I/O), so the sync
and the async client send exactly the same requests and decode the same answers."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import msgspec

from schemas.events import TimelinePage
from schemas.knowledge import Document, DocumentFormat, DocumentList, PassageList
from schemas.schedule import Schedule, ScheduleList
from schemas.spec import AgentSpec, WhileBusy
from schemas.tenant import PublishedSpec, SpecVersions
from services.client.errors import ApiError, from_response
from services.client.models import (
    Accepted,
    AgentPage,
    ApprovalAccepted,
    Deployment,
    Forked,
    HoldAccepted,
    Hook,
    HookList,
    KeyInfo,
    KeyList,
    Me,
    NewHook,
    NewKey,
    StopAccepted,
)
from services.client.models import Agent as AgentRow

T = TypeVar("T")
IDEMPOTENCY = "Idempotency-Key"


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    answer: type[T]
    params: dict[str, str | int] = field(default_factory=dict)
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = False
    """Sending it twice does nothing twice: the gateway keys an approval's answer by its
    request, and a second pause (or resume) finds the agent held (or running) already.
    Not a stop: one sent again after the first applied could stop the next turn."""

    @property
    def repeatable(self) -> bool:
        """Whether sending it again, after an answer that was lost or a 503, cannot do
        anything twice: a read, or a request with an idempotency key."""
        return self.method == "GET" or self.idempotent or IDEMPOTENCY in self.headers

    def decode(self, status: int, content: bytes) -> T:
        if status >= 400:
            raise from_response(status, content)
        try:
            return msgspec.json.decode(content, type=self.answer)
        except msgspec.DecodeError as error:
            raise ApiError(status, f"the gateway answered something unexpected: {error}") from error


def worth_again(call: Call[Any], error: ApiError, *, sent: bool = True) -> bool:
    """Whether to send `call` again after `error`: no answer came, or a 503 (Restate's
    ingress failing over, the read side restarting), and sending it again cannot do
    anything twice: it never left (`sent` false: no connection was made), or it is
    `repeatable`."""
    return error.retryable and (call.repeatable or not sent)


def agent_path(address: str) -> str:
    return f"/v1/agents/{quote(address, safe='')}"


def _json(value: Any) -> bytes:
    return msgspec.json.encode(value)


def send(
    address: str,
    text: str,
    kind: str | None,
    idempotency_key: str | None,
    while_busy: WhileBusy | None = None,
) -> Call[Accepted]:
    body: dict[str, str] = {"text": text} | ({"kind": kind} if kind else {})
    body |= {"while_busy": while_busy} if while_busy else {}
    # A key of its own when the caller gives none: a retry after a lost answer or a 503 is
    # then the same send, which Restate keeps once.
    headers = {IDEMPOTENCY: idempotency_key or f"client-{secrets.token_hex(16)}"}
    return Call(
        "POST", f"{agent_path(address)}/messages", Accepted, body=_json(body), headers=headers
    )


def agent(address: str) -> Call[AgentRow]:
    return Call("GET", agent_path(address), AgentRow)


def agents(kind: str | None, status: str | None, after: str, limit: int) -> Call[AgentPage]:
    params: dict[str, str | int] = {"after": after, "limit": limit}
    params |= {"kind": kind} if kind else {}
    params |= {"status": status} if status else {}
    return Call("GET", "/v1/agents", AgentPage, params=params)


def timeline(address: str, after: int, limit: int) -> Call[TimelinePage]:
    params: dict[str, str | int] = {"after": after, "limit": limit}
    return Call("GET", f"{agent_path(address)}/timeline", TimelinePage, params=params)


def answer(
    address: str,
    request_id: str,
    approve: bool,
    note: str,
    answers: Mapping[str, Mapping[str, Any]] | None = None,
) -> Call[ApprovalAccepted]:
    path = f"{agent_path(address)}/approvals/{quote(request_id, safe='')}"
    body: dict[str, Any] = {"approve": approve, "note": note}
    body |= {"answers": dict(answers)} if answers else {}
    return Call("POST", path, ApprovalAccepted, body=_json(body), idempotent=True)


def stop(address: str) -> Call[StopAccepted]:
    return Call("POST", f"{agent_path(address)}/stop", StopAccepted)


def fork(address: str, seq: int, new: str) -> Call[Forked]:
    body = _json({"seq": seq, "address": new})
    return Call("POST", f"{agent_path(address)}/fork", Forked, body=body)


def pause(address: str) -> Call[HoldAccepted]:
    return Call("POST", f"{agent_path(address)}/pause", HoldAccepted, idempotent=True)


def resume(address: str) -> Call[HoldAccepted]:
    return Call("POST", f"{agent_path(address)}/resume", HoldAccepted, idempotent=True)


def specs(kind: str | None) -> Call[SpecVersions]:
    return Call("GET", "/v1/specs", SpecVersions, params={"kind": kind} if kind else {})


def publish(spec: AgentSpec | Mapping[str, Any]) -> Call[PublishedSpec]:
    raw = dict(spec) if isinstance(spec, Mapping) else msgspec.to_builtins(spec)
    raw.pop("version", None)
    return Call("POST", "/v1/specs", PublishedSpec, body=_json(raw))


def deployment() -> Call[Deployment]:
    return Call("GET", "/v1/deployment", Deployment)


def me() -> Call[Me]:
    return Call("GET", "/v1/me", Me)


def keys() -> Call[KeyList]:
    return Call("GET", "/v1/keys", KeyList)


def create_key(scope: str, name: str) -> Call[NewKey]:
    body = {"scope": scope} | ({"name": name} if name else {})
    return Call("POST", "/v1/keys", NewKey, body=_json(body))


def revoke_key(key_id: str) -> Call[KeyInfo]:
    return Call("POST", f"/v1/keys/{quote(key_id, safe='')}/revoke", KeyInfo)


def add_schedule(address: str, schedule: Mapping[str, Any]) -> Call[Schedule]:
    return Call("POST", f"{agent_path(address)}/schedules", Schedule, body=_json(dict(schedule)))


def schedules(address: str) -> Call[ScheduleList]:
    return Call("GET", f"{agent_path(address)}/schedules", ScheduleList)


def remove_schedule(address: str, schedule_id: str) -> Call[Schedule]:
    path = f"{agent_path(address)}/schedules/{quote(schedule_id, safe='')}"
    return Call("DELETE", path, Schedule)


def create_hook(hook: Mapping[str, Any]) -> Call[NewHook]:
    return Call("POST", "/v1/hooks", NewHook, body=_json(dict(hook)))


def hooks() -> Call[HookList]:
    return Call("GET", "/v1/hooks", HookList)


def remove_hook(hook_id: str) -> Call[Hook]:
    return Call("DELETE", f"/v1/hooks/{quote(hook_id, safe='')}", Hook)


def upload_document(title: str, text: str, format_: DocumentFormat) -> Call[Document]:
    body = _json({"title": title, "text": text, "format": format_})
    return Call("POST", "/v1/knowledge", Document, body=body)


def upload_pdf(title: str, pdf: bytes) -> Call[Document]:
    headers = {"content-type": "application/pdf"}
    params: dict[str, str | int] = {"title": title}
    return Call("POST", "/v1/knowledge/pdf", Document, params=params, body=pdf, headers=headers)


def release_document(document_id: str) -> Call[Document]:
    return Call("POST", f"/v1/knowledge/{quote(document_id, safe='')}/release", Document)


def documents(limit: int = 100) -> Call[DocumentList]:
    return Call("GET", "/v1/knowledge", DocumentList, params={"limit": limit})


def search_documents(query: str, limit: int = 5) -> Call[PassageList]:
    return Call("GET", "/v1/knowledge/search", PassageList, params={"q": query, "limit": limit})


def delete_document(document_id: str) -> Call[Document]:
    return Call("DELETE", f"/v1/knowledge/{quote(document_id, safe='')}", Document)
