"""The gateway's upstream: agents and tenants, reached only through Restate ingress. It
sends messages one-way and publishes specs; it never writes state itself. Calls go through
the one ingress client and the handlers declared in `services.contracts`; errors become
the gateway's `ApiError`s.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import httpx
import msgspec

from schemas.events import AgentStatus
from schemas.hook import Delivery, HookSpec, TenantHookList
from schemas.knowledge import DocumentAnswer, DocumentRef, DocumentUpload
from schemas.lifecycle import Archived, ErasureRecord, ErasureRequest, ForkRequest, MemoryErasure
from schemas.memory import MemoryAnswer, MemoryNote, MemoryScope
from schemas.schedule import Schedule, ScheduleList, ScheduleRef, ScheduleSpec
from schemas.spec import AgentSpec
from schemas.tenant import ApiKey, EndUsers, KeyRef, Keys, Offered, PublishedSpec, SpecQuery
from schemas.wake import Approval, Arrival, Message, PageCall, Pause, Resume, Stop, WakeEnvelope
from services.contracts import (
    ADD_KEY,
    ADD_SCHEDULE,
    ARCHIVE,
    ARRIVED,
    CREATE_HOOK,
    DELETE_DOCUMENT,
    DELETE_HOOK,
    DELIVER,
    ERASE_AGENT,
    ERASE_MEMORIES,
    ERASE_TENANT,
    FORK,
    GET_HOOK,
    KEYS,
    LATEST_SPEC,
    LIST_HOOKS,
    LIST_SCHEDULES,
    OFFERED,
    PAUSE,
    PUBLISH,
    RELEASE_DOCUMENT,
    REMEMBER,
    REMOVE_SCHEDULE,
    REVOKE_KEY,
    SET_END_USERS,
    STOP,
    UNARCHIVE,
    UPLOAD_DOCUMENT,
    WAKE,
    Empty,
)
from services.gateway.errors import ApiError
from services.ingress import AsyncIngress, IngressError

T = TypeVar("T")
QUICK = 5.0
"""Seconds to wait for Restate to accept a send, or for a read-only handler."""
FORK_PATIENCE = 120.0
"""Seconds a fork or an erasure may take: a fork copies the source's events and workspace,
an erasure waits for what it killed to end."""


class IngressUnavailableError(ApiError):
    def __init__(self, reason: str) -> None:
        super().__init__(503, f"Restate ingress cannot take the request right now ({reason})")


class Upstream:
    def __init__(
        self, url: str, transport: httpx.AsyncBaseTransport | None = None, timeout: float = 30.0
    ) -> None:
        self.url = url
        self._client = AsyncIngress(url, timeout=timeout, transport=transport)

    async def close(self) -> None:
        await self._client.close()

    async def send_message(
        self, address: str, message: Message, idempotency_key: str | None, *, arrived: bool
    ) -> str:
        """One-way: returns the invocation id as soon as Restate has the message; its
        `turn_started` carries `message.id`. `arrived` also tells the agent's `arrived`
        handler, which reaches a turn running now (it interrupts it, steers it, or is
        recorded queued by it)."""
        envelope = WakeEnvelope(message)
        send = self._client.send(WAKE, envelope, address, idempotency_key, QUICK)
        invocation = await _answer(send)
        if arrived:
            key = f"arrived {invocation}"
            told = self._client.send(ARRIVED, Arrival(message, invocation), address, key, QUICK)
            await _answer(told)
        return invocation

    async def answer(self, address: str, answer: Approval, idempotency_key: str) -> str:
        """One-way: Restate keeps the answer durably, even while the endpoint is down."""
        send = self._client.send(WAKE, WakeEnvelope(answer), address, idempotency_key, QUICK)
        return await _answer(send)

    async def page_call(
        self, address: str, call: PageCall, idempotency_key: str | None
    ) -> tuple[str, bool]:
        """One-way: a page's claim, result or closing; with whether Restate took it as the
        first send of `idempotency_key` (a repeat runs nothing). Without a key, always
        the first."""
        envelope = WakeEnvelope(call)
        if idempotency_key is None:
            return await _answer(self._client.send(WAKE, envelope, address, None, QUICK)), True
        send = self._client.send_once(WAKE, envelope, address, idempotency_key, QUICK)
        return await _answer(send)

    async def stop(self, address: str, idempotency_key: str, turn: int = 0) -> str:
        """One-way to the shared `stop` handler, which runs beside a running wake and
        cancels it; a turn that waits is stopped by the wake it sends. `turn`: stop only
        that turn (0: whichever is in progress)."""
        stop = Stop(turn=turn)
        return await _answer(self._client.send(STOP, stop, address, idempotency_key, QUICK))

    async def pause(self, address: str, pause: Pause, idempotency_key: str) -> str:
        """One-way to the shared `pause` handler, which reaches a running turn at its next
        round boundary and sends the `Pause` wake that holds the agent."""
        return await _answer(self._client.send(PAUSE, pause, address, idempotency_key, QUICK))

    async def resume(self, address: str, resume: Resume, idempotency_key: str) -> str:
        send = self._client.send(WAKE, WakeEnvelope(resume), address, idempotency_key, QUICK)
        return await _answer(send)

    async def fork(self, address: str, request: ForkRequest) -> AgentStatus:
        """The new agent `address`, made a fork of `request.source`: its answer once made."""
        return await _answer(self._client.call(FORK, request, address, patience=FORK_PATIENCE))

    async def archive(self, address: str, *, back: bool = False) -> Archived:
        """Move the agent's state out of Restate to the archive store, or (`back`) bring
        it back; what was moved."""
        handler = UNARCHIVE if back else ARCHIVE
        return await _answer(self._client.call(handler, Empty(), address, patience=FORK_PATIENCE))

    async def erase(self, tenant: str, request: ErasureRequest) -> ErasureRecord:
        """Erase one agent (`request.address`) or the whole tenant; the erasure's record."""
        handler = ERASE_AGENT if request.address else ERASE_TENANT
        return await _answer(self._client.call(handler, request, tenant, patience=FORK_PATIENCE))

    async def publish(self, tenant: str, spec: AgentSpec) -> PublishedSpec:
        return await _answer(self._client.call(PUBLISH, spec, tenant))

    async def latest_spec(self, tenant: str, kind: str) -> AgentSpec | None:
        """The tenant object's own answer, for when the projection has not caught up."""
        query = self._client.call(LATEST_SPEC, SpecQuery(kind), tenant, patience=QUICK)
        return (await _answer(query)).spec

    async def add_key(self, key: ApiKey) -> ApiKey:
        return await _answer(self._client.call(ADD_KEY, key, key.tenant))

    async def keys(self, tenant: str) -> Keys:
        return await _answer(self._client.call(KEYS, Empty(), tenant, patience=QUICK))

    async def set_end_users(self, tenant: str, wanted: EndUsers) -> EndUsers:
        return await _answer(self._client.call(SET_END_USERS, wanted, tenant))

    async def offered(self, tenant: str) -> Offered:
        return await _answer(self._client.call(OFFERED, Empty(), tenant, patience=QUICK))

    async def revoke_key(self, tenant: str, key_id: str) -> ApiKey:
        return await _answer(self._client.call(REVOKE_KEY, KeyRef(key_id), tenant))

    async def add_schedule(
        self, address: str, spec: ScheduleSpec, idempotency_key: str | None = None
    ) -> Schedule:
        """A retry with the same `idempotency_key` answers the schedule made the first time."""
        key = f"schedule {idempotency_key}" if idempotency_key else None
        return await _answer(self._client.call(ADD_SCHEDULE, spec, address, idempotency_key=key))

    async def schedules(self, address: str) -> ScheduleList:
        listed = self._client.call(LIST_SCHEDULES, Empty(), address, patience=QUICK)
        return await _answer(listed)

    async def remove_schedule(self, address: str, schedule_id: str) -> Schedule:
        return await _answer(self._client.call(REMOVE_SCHEDULE, ScheduleRef(schedule_id), address))

    async def create_hook(
        self, hook_id: str, spec: HookSpec, idempotency_key: str | None = None
    ) -> HookSpec:
        key = f"hook {idempotency_key}" if idempotency_key else None
        return await _answer(self._client.call(CREATE_HOOK, spec, hook_id, idempotency_key=key))

    async def hook(self, hook_id: str) -> HookSpec | None:
        answer = self._client.call(GET_HOOK, Empty(), hook_id, patience=QUICK)
        return (await _answer(answer)).hook

    async def hooks(self, tenant: str) -> TenantHookList:
        return await _answer(self._client.call(LIST_HOOKS, Empty(), tenant, patience=QUICK))

    async def delete_hook(self, hook_id: str) -> HookSpec:
        return await _answer(self._client.call(DELETE_HOOK, Empty(), hook_id))

    async def deliver(self, hook_id: str, delivery: Delivery) -> str:
        """One-way, keyed by the delivery's `webhook-id`: Restate runs it once."""
        key = f"webhook {hook_id} {delivery.webhook_id}"
        return await _answer(self._client.send(DELIVER, delivery, hook_id, key, QUICK))

    async def remember(self, note: MemoryNote) -> MemoryAnswer:
        return await _answer(self._client.call(REMEMBER, note, note.scope.key))

    async def forget_memory(self, scope: MemoryScope, memory_id: str, by: str) -> MemoryAnswer:
        asked = MemoryErasure(scope, memory_id, by)
        return await _answer(self._client.call(ERASE_MEMORIES, asked, scope.tenant))

    async def forget_memories(self, scope: MemoryScope, by: str) -> MemoryAnswer:
        asked = MemoryErasure(scope, by=by)
        return await _answer(self._client.call(ERASE_MEMORIES, asked, scope.tenant))

    async def upload_document(self, tenant: str, upload: DocumentUpload) -> DocumentAnswer:
        return await _answer(self._client.call(UPLOAD_DOCUMENT, upload, tenant))

    async def release_document(self, tenant: str, document_id: str) -> DocumentAnswer:
        ref = DocumentRef(document_id)
        return await _answer(self._client.call(RELEASE_DOCUMENT, ref, tenant))

    async def delete_document(self, tenant: str, document_id: str) -> DocumentAnswer:
        ref = DocumentRef(document_id)
        return await _answer(self._client.call(DELETE_DOCUMENT, ref, tenant))

    async def healthy(self) -> str:
        """'ok', or a sentence saying why ingress does not answer."""
        try:
            response = await self._client.http.get("/restate/health", timeout=3.0)
        except httpx.HTTPError as error:
            return f"not reachable at {self.url} ({_why(error)})"
        if response.status_code != httpx.codes.OK:
            return f"answered {response.status_code} to its health check"
        return "ok"


def _why(error: httpx.HTTPError) -> str:
    """What a failed exchange with Restate means for the caller, in words."""
    if isinstance(error, httpx.TimeoutException):
        return (
            "it did not answer in time, as when the service endpoint is down; the request "
            "may still be carried out once it is back, so check before sending it again"
        )
    if isinstance(error, httpx.ConnectError):
        return "nothing answers at its address"
    return "the connection to it failed"


async def _answer(request: Awaitable[T]) -> T:
    """A handler's terminal 4xx is the client's to fix; anything else is ours."""
    try:
        return await request
    except httpx.HTTPError as error:
        raise IngressUnavailableError(_why(error)) from error
    except msgspec.DecodeError as error:
        raise IngressUnavailableError("it answered something unexpected") from error
    except IngressError as error:
        if 400 <= error.status < 500 and error.from_handler:
            raise ApiError(error.status, error.message) from error
        raise IngressUnavailableError(f"{error.status}: {error.message}") from error
