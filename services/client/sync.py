"""The blocking client."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from schemas.events import Event, TimelinePage, TurnEnded
from schemas.knowledge import Document, DocumentFormat, PassageHit
from schemas.schedule import Schedule
from schemas.spec import AgentSpec, WhileBusy
from schemas.tenant import PublishedSpec
from services.client import calls
from services.client.errors import ApiError, from_response, unreachable
from services.client.models import (
    Accepted,
    Agent,
    AgentPage,
    ApprovalAccepted,
    Deployment,
    Forked,
    HoldAccepted,
    Hook,
    Item,
    KeyInfo,
    Me,
    NewHook,
    NewKey,
    StopAccepted,
)
from services.client.reconnect import RETRY_FOR, Backoff
from services.client.stream import Cursor, FrameParser, decode

T = TypeVar("T")


class Client:
    """The teaspill HTTP API, for one API key.

        with Client("http://127.0.0.1:8000", key) as client:
            client.send("acme.helper", "hello", kind="assistant")

    Every failure raises `ApiError` with the gateway's sentence and status.
    """

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retry_for: float = RETRY_FOR,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry_for = retry_for
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {key}"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def _do(self, call: calls.Call[T]) -> T:
        """Send `call`; after no answer or a 503 it is sent again for up to `retry_for`
        seconds, when that cannot do anything twice (`calls.worth_again`)."""
        headers = {**({"content-type": "application/json"} if call.body else {}), **call.headers}
        backoff = Backoff(self.retry_for)
        while True:
            try:
                response = self._http.request(
                    call.method, call.path, params=call.params, content=call.body, headers=headers
                )
            except httpx.TransportError as error:
                failure = unreachable(self.url, error)
                sent = not isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)
                if not calls.worth_again(call, failure, sent=sent) or backoff.exhausted():
                    raise failure from error
            else:
                try:
                    return call.decode(response.status_code, response.content)
                except ApiError as refused:
                    if not calls.worth_again(call, refused) or backoff.exhausted():
                        raise
            time.sleep(backoff.next_delay())

    def send(
        self,
        address: str,
        text: str,
        *,
        kind: str | None = None,
        idempotency_key: str | None = None,
        while_busy: WhileBusy | None = None,
    ) -> Accepted:
        """Send a message, one-way; `kind` creates the agent (or switches its kind);
        `while_busy` says what it does if a turn is in progress (`queue`, `interrupt`,
        `steer`, `reject`: a 409 `ApiError` while the agent is busy)."""
        return self._do(calls.send(address, text, kind, idempotency_key, while_busy))

    def agent(self, address: str) -> Agent:
        return self._do(calls.agent(address))

    def agents_page(
        self,
        *,
        kind: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 50,
    ) -> AgentPage:
        return self._do(calls.agents(kind, status, after, limit))

    def agents(self, *, kind: str | None = None, status: str | None = None) -> Iterator[Agent]:
        """Every agent of the key's tenant, page after page, ordered by address."""
        after: str | None = ""
        while after is not None:
            page = self.agents_page(kind=kind, status=status, after=after, limit=200)
            yield from page.agents
            after = page.next

    def timeline(self, address: str, *, after: int = 0, limit: int = 100) -> TimelinePage:
        """One page of recorded events after seq `after`."""
        return self._do(calls.timeline(address, after, limit))

    def events(self, address: str, *, after: int = 0) -> Iterator[Event]:
        """Every recorded event after `after`, page after page, without following."""
        while True:
            page = self.timeline(address, after=after, limit=500)
            yield from page.events
            if not page.events or page.events[-1].seq >= page.last_seq:
                return
            after = page.events[-1].seq

    def follow(self, address: str, *, after: int = 0, retry_for: float = 60.0) -> Iterator[Item]:
        """The timeline after `after`, then live: recorded events (each once, in seq
        order), live text (`LiveDelta`) and `Retraction`. A dropped connection is resumed
        with `Last-Event-ID`; after `retry_for` seconds without a connection the last
        error is raised. It never ends by itself: stop iterating when you have seen
        enough (see `until_turn_ends`)."""
        cursor = Cursor(last=after)
        backoff = Backoff(retry_for)
        while True:
            try:
                yield from self._stream(address, cursor, backoff)
            except ApiError as error:
                if not error.retryable or backoff.exhausted():
                    raise
            time.sleep(backoff.next_delay())

    def _stream(self, address: str, cursor: Cursor, backoff: Backoff) -> Iterator[Item]:
        path = f"{calls.agent_path(address)}/events"
        headers = {"Last-Event-ID": cursor.last_event_id, "Accept": "text/event-stream"}
        try:
            with self._http.stream("GET", path, headers=headers, timeout=None) as response:
                if response.status_code >= 400:
                    raise from_response(response.status_code, response.read())
                backoff.connected()
                parser = FrameParser()
                for line in response.iter_lines():
                    frame = parser.line(line)
                    item = decode(frame) if frame else None
                    if item is not None:
                        yield from cursor.admit(item)
        except httpx.TransportError as error:
            raise unreachable(self.url, error) from error

    def approve(
        self,
        address: str,
        request_id: str,
        note: str = "",
        answers: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> ApprovalAccepted:
        """One-way (202): the outcome lands on the timeline after `after_seq`. `answers`:
        for a call that asks for input, the form's values per question key."""
        return self._do(calls.answer(address, request_id, True, note, answers))

    def deny(self, address: str, request_id: str, note: str = "") -> ApprovalAccepted:
        return self._do(calls.answer(address, request_id, False, note))

    def stop(self, address: str) -> StopAccepted:
        """One-way (202): the turn's end, or `stop_refused`, lands on the timeline."""
        return self._do(calls.stop(address))

    def fork(self, address: str, seq: int, new: str) -> Forked:
        """A new agent `new` whose timeline is `address`'s first `seq` events (201)."""
        return self._do(calls.fork(address, seq, new))

    def pause(self, address: str) -> HoldAccepted:
        """One-way (202): the agent holds after its running round; `agent_paused`."""
        return self._do(calls.pause(address))

    def resume(self, address: str) -> HoldAccepted:
        """One-way (202): the held turn goes on, then what queued; `agent_resumed`."""
        return self._do(calls.resume(address))

    def specs(self, kind: str | None = None) -> tuple[PublishedSpec, ...]:
        return self._do(calls.specs(kind)).versions

    def publish(self, spec: AgentSpec | Mapping[str, Any]) -> PublishedSpec:
        """Publish a spec (an `AgentSpec`, or its JSON as a mapping): a new version."""
        return self._do(calls.publish(spec))

    def deployment(self) -> Deployment:
        """What the deployment offers this key's tenant: models, tools, published kinds."""
        return self._do(calls.deployment())

    def me(self) -> Me:
        return self._do(calls.me())

    def keys(self) -> tuple[KeyInfo, ...]:
        return self._do(calls.keys()).keys

    def create_key(self, scope: str = "read", name: str = "") -> NewKey:
        return self._do(calls.create_key(scope, name))

    def revoke_key(self, key_id: str) -> KeyInfo:
        return self._do(calls.revoke_key(key_id))

    def add_schedule(self, address: str, schedule: Mapping[str, Any]) -> Schedule:
        """`schedule` as the route takes it: `text` and one of `every`, `cron`, `at`."""
        return self._do(calls.add_schedule(address, schedule))

    def schedules(self, address: str) -> tuple[Schedule, ...]:
        """The agent's schedules, each with its next fire (`next_at`)."""
        return (self._do(calls.schedules(address))).schedules

    def remove_schedule(self, address: str, schedule_id: str) -> Schedule:
        return self._do(calls.remove_schedule(address, schedule_id))

    def create_hook(self, hook: Mapping[str, Any]) -> NewHook:
        """`hook` as `POST /v1/hooks` takes it; the answer's `secret` is shown this once."""
        return self._do(calls.create_hook(hook))

    def hooks(self) -> tuple[Hook, ...]:
        return (self._do(calls.hooks())).hooks

    def remove_hook(self, hook_id: str) -> Hook:
        return self._do(calls.remove_hook(hook_id))

    def upload_document(self, title: str, text: str, format_: DocumentFormat = "text") -> Document:
        """A draft, never searched until released; a text the tenant has already is that
        document."""
        return self._do(calls.upload_document(title, text, format_))

    def upload_pdf(self, title: str, pdf: bytes) -> Document:
        """A draft of the PDF's pages' text (format `pdf`), as `upload_document`."""
        return self._do(calls.upload_pdf(title, pdf))

    def release_document(self, document_id: str) -> Document:
        """Its passages are searchable once this returns."""
        return self._do(calls.release_document(document_id))

    def documents(self, limit: int = 100) -> tuple[Document, ...]:
        """The tenant's documents, drafts too, newest first."""
        return (self._do(calls.documents(limit))).documents

    def search_documents(self, query: str, limit: int = 5) -> tuple[PassageHit, ...]:
        """Passages of released documents, most relevant first."""
        return (self._do(calls.search_documents(query, limit))).passages

    def delete_document(self, document_id: str) -> Document:
        return self._do(calls.delete_document(document_id))


def until_turn_ends(items: Iterator[Item]) -> Iterator[Item]:
    """`items` up to and including the first `turn_ended` event."""
    for item in items:
        yield item
        if isinstance(item, Event) and isinstance(item.body, TurnEnded):
            return
