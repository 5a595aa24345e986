"""The asyncio client: the same calls as `Client`, awaited."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
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


class AsyncClient:
    """The teaspill HTTP API for one API key, for asyncio programs.

        async with AsyncClient("http://127.0.0.1:8000", key) as client:
            async for item in client.follow("acme.helper"):
                ...

    Every failure raises `ApiError` with the gateway's sentence and status.
    """

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retry_for: float = RETRY_FOR,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry_for = retry_for
        self._http = httpx.AsyncClient(
            base_url=self.url,
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {key}"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        await self.aclose()

    async def _do(self, call: calls.Call[T]) -> T:
        """Send `call`; after no answer or a 503 it is sent again for up to `retry_for`
        seconds, when that cannot do anything twice (`calls.worth_again`)."""
        headers = {**({"content-type": "application/json"} if call.body else {}), **call.headers}
        backoff = Backoff(self.retry_for)
        while True:
            try:
                response = await self._http.request(
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
            await asyncio.sleep(backoff.next_delay())

    async def send(
        self,
        address: str,
        text: str,
        *,
        kind: str | None = None,
        idempotency_key: str | None = None,
        while_busy: WhileBusy | None = None,
    ) -> Accepted:
        return await self._do(calls.send(address, text, kind, idempotency_key, while_busy))

    async def agent(self, address: str) -> Agent:
        return await self._do(calls.agent(address))

    async def agents_page(
        self,
        *,
        kind: str | None = None,
        status: str | None = None,
        after: str = "",
        limit: int = 50,
    ) -> AgentPage:
        return await self._do(calls.agents(kind, status, after, limit))

    async def agents(
        self, *, kind: str | None = None, status: str | None = None
    ) -> AsyncIterator[Agent]:
        after: str | None = ""
        while after is not None:
            page = await self.agents_page(kind=kind, status=status, after=after, limit=200)
            for row in page.agents:
                yield row
            after = page.next

    async def timeline(self, address: str, *, after: int = 0, limit: int = 100) -> TimelinePage:
        return await self._do(calls.timeline(address, after, limit))

    async def events(self, address: str, *, after: int = 0) -> AsyncIterator[Event]:
        while True:
            page = await self.timeline(address, after=after, limit=500)
            for event in page.events:
                yield event
            if not page.events or page.events[-1].seq >= page.last_seq:
                return
            after = page.events[-1].seq

    async def follow(
        self, address: str, *, after: int = 0, retry_for: float = 60.0
    ) -> AsyncGenerator[Item, None]:
        """As `Client.follow`: every recorded event once, live text, resumed by itself."""
        cursor = Cursor(last=after)
        backoff = Backoff(retry_for)
        while True:
            try:
                # Closed here, not left to the event loop's finalizer: a reader that stops
                # iterating (and closes this generator) closes the stream at once.
                async with contextlib.aclosing(self._stream(address, cursor, backoff)) as items:
                    async for item in items:
                        yield item
            except ApiError as error:
                if not error.retryable or backoff.exhausted():
                    raise
            await asyncio.sleep(backoff.next_delay())

    async def _stream(
        self, address: str, cursor: Cursor, backoff: Backoff
    ) -> AsyncGenerator[Item, None]:
        path = f"{calls.agent_path(address)}/events"
        headers = {"Last-Event-ID": cursor.last_event_id, "Accept": "text/event-stream"}
        try:
            async with self._http.stream("GET", path, headers=headers, timeout=None) as response:
                if response.status_code >= 400:
                    raise from_response(response.status_code, await response.aread())
                backoff.connected()
                parser = FrameParser()
                async for line in response.aiter_lines():
                    frame = parser.line(line)
                    item = decode(frame) if frame else None
                    for admitted in cursor.admit(item) if item is not None else ():
                        yield admitted
        except httpx.TransportError as error:
            raise unreachable(self.url, error) from error

    async def approve(
        self,
        address: str,
        request_id: str,
        note: str = "",
        answers: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> ApprovalAccepted:
        return await self._do(calls.answer(address, request_id, True, note, answers))

    async def deny(self, address: str, request_id: str, note: str = "") -> ApprovalAccepted:
        return await self._do(calls.answer(address, request_id, False, note))

    async def stop(self, address: str) -> StopAccepted:
        return await self._do(calls.stop(address))

    async def fork(self, address: str, seq: int, new: str) -> Forked:
        """A new agent `new` whose timeline is `address`'s first `seq` events (201)."""
        return await self._do(calls.fork(address, seq, new))

    async def pause(self, address: str) -> HoldAccepted:
        return await self._do(calls.pause(address))

    async def resume(self, address: str) -> HoldAccepted:
        return await self._do(calls.resume(address))

    async def specs(self, kind: str | None = None) -> tuple[PublishedSpec, ...]:
        return (await self._do(calls.specs(kind))).versions

    async def publish(self, spec: AgentSpec | Mapping[str, Any]) -> PublishedSpec:
        """Publish a spec (an `AgentSpec`, or its JSON as a mapping): a new version."""
        return await self._do(calls.publish(spec))

    async def deployment(self) -> Deployment:
        """What the deployment offers this key's tenant: models, tools, published kinds."""
        return await self._do(calls.deployment())

    async def me(self) -> Me:
        return await self._do(calls.me())

    async def keys(self) -> tuple[KeyInfo, ...]:
        return (await self._do(calls.keys())).keys

    async def create_key(self, scope: str = "read", name: str = "") -> NewKey:
        return await self._do(calls.create_key(scope, name))

    async def revoke_key(self, key_id: str) -> KeyInfo:
        return await self._do(calls.revoke_key(key_id))

    async def add_schedule(self, address: str, schedule: Mapping[str, Any]) -> Schedule:
        """`schedule` as the route takes it: `text` and one of `every`, `cron`, `at`."""
        return await self._do(calls.add_schedule(address, schedule))

    async def schedules(self, address: str) -> tuple[Schedule, ...]:
        """The agent's schedules, each with its next fire (`next_at`)."""
        return (await self._do(calls.schedules(address))).schedules

    async def remove_schedule(self, address: str, schedule_id: str) -> Schedule:
        return await self._do(calls.remove_schedule(address, schedule_id))

    async def create_hook(self, hook: Mapping[str, Any]) -> NewHook:
        """`hook` as `POST /v1/hooks` takes it; the answer's `secret` is shown this once."""
        return await self._do(calls.create_hook(hook))

    async def hooks(self) -> tuple[Hook, ...]:
        return (await self._do(calls.hooks())).hooks

    async def remove_hook(self, hook_id: str) -> Hook:
        return await self._do(calls.remove_hook(hook_id))

    async def upload_document(
        self, title: str, text: str, format_: DocumentFormat = "text"
    ) -> Document:
        """A draft, never searched until released; a text the tenant has already is that
        document."""
        return await self._do(calls.upload_document(title, text, format_))

    async def upload_pdf(self, title: str, pdf: bytes) -> Document:
        """A draft of the PDF's pages' text (format `pdf`), as `upload_document`."""
        return await self._do(calls.upload_pdf(title, pdf))

    async def release_document(self, document_id: str) -> Document:
        """Its passages are searchable once this returns."""
        return await self._do(calls.release_document(document_id))

    async def documents(self, limit: int = 100) -> tuple[Document, ...]:
        """The tenant's documents, drafts too, newest first."""
        return (await self._do(calls.documents(limit))).documents

    async def search_documents(self, query: str, limit: int = 5) -> tuple[PassageHit, ...]:
        """Passages of released documents, most relevant first."""
        return (await self._do(calls.search_documents(query, limit))).passages

    async def delete_document(self, document_id: str) -> Document:
        return await self._do(calls.delete_document(document_id))


async def until_turn_ends(items: AsyncIterator[Item]) -> AsyncIterator[Item]:
    """`items` up to and including the first `turn_ended` event."""
    async for item in items:
        yield item
        if isinstance(item, Event) and isinstance(item.body, TurnEnded):
            return
