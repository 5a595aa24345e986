"""Rebuilding the projections from the source of truth: every agent's timeline, every
tenant's specs and keys, its knowledge documents, and every scope's memory records, read
through Restate; and the
timelines of archived agents, whose state is out of Restate, read from the archive store
(their catalog rows marked archived again)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from schemas.events import Event, TimelineQuery
from schemas.knowledge import DocumentRef
from schemas.memory import MemoryPage
from schemas.projection import RebuildReport
from services.contracts import (
    AGENT,
    DOCUMENTS,
    INDEXED_DOCUMENT,
    KEYS,
    KNOWLEDGE,
    MEMORY,
    MEMORY_RECORDS,
    SPECS,
    STATUS,
    TENANT,
    TIMELINE,
    Empty,
)
from services.ingress import AsyncIngress
from services.projection.catalog import Decided
from services.projection.stores import ReadSide

PAGE = 500


class ArchivedTimelines(Protocol):
    """The archive store's side of a rebuild (`services.lifecycle.archive`)."""

    def addresses(self) -> list[str]:
        """Every agent the store holds a copy of."""

    async def events(self, address: str) -> Sequence[Event]:
        """The agent's whole timeline as its copy holds it (none: no copy now)."""


async def rebuild_from_restate(
    store: ReadSide,
    ingress_url: str,
    admin_url: str,
    archived: ArchivedTimelines | None = None,
) -> RebuildReport:
    ingress = AsyncIngress(ingress_url, timeout=60)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            agents = await _keys_of(http, admin_url, AGENT)
            tenants = await _keys_of(http, admin_url, TENANT)
            libraries = await _keys_of(http, admin_url, KNOWLEDGE)
            scopes = await _keys_of(http, admin_url, MEMORY)
        events = 0
        for agent in agents:
            events += await _copy_timeline(ingress, store, agent)
        if archived is not None:
            out, copied = await _copy_archived(archived, store, set(agents))
            agents, events = agents + out, events + copied
        specs = keys = 0
        for tenant in tenants:
            specs += await _copy_specs(ingress, store, tenant)
            keys += await _copy_keys(ingress, store, tenant)
        documents = sum([await _copy_documents(ingress, store, t) for t in libraries])
        memories = sum([await _copy_memories(ingress, store, scope) for scope in scopes])
    finally:
        await ingress.close()
    return RebuildReport(len(agents), events, specs, keys, documents, memories)


async def _keys_of(http: httpx.AsyncClient, admin_url: str, service: str) -> list[str]:
    query = f"select distinct service_key from state where service_name = '{service}'"  # noqa: S608
    response = await http.post(
        f"{admin_url}/query", json={"query": query}, headers={"accept": "application/json"}
    )
    response.raise_for_status()
    rows: list[dict[str, Any]] = response.json()["rows"]
    return sorted(str(row["service_key"]) for row in rows)


async def _copy_timeline(ingress: AsyncIngress, store: ReadSide, agent: str) -> int:
    """The agent's timeline, page by page, then its status as the agent decides it (from
    its turn's phase), as the agent's own batches carry it."""
    after = copied = 0
    last: tuple[Event, ...] = ()
    while True:
        page = await ingress.call(TIMELINE, TimelineQuery(after_seq=after, limit=PAGE), agent)
        if page.events:
            await store.record_events(page.events)
            copied += len(page.events)
            after, last = page.events[-1].seq, page.events[-1:]
        if not page.events or after >= page.last_seq:
            break
    if last:
        status = await ingress.call(STATUS, Empty(), agent)
        if status.state != "running" and status.last_seq == after:
            await store.record(last, statuses={agent: Decided(status.state, after)})
    return copied


async def _copy_archived(
    archived: ArchivedTimelines, store: ReadSide, held: set[str]
) -> tuple[list[str], int]:
    """The archived agents' timelines from their copies, and their catalog rows marked
    archived (what archiving them had shown); a read through Restate would bring them
    back. An agent `held` in Restate was read from there (a copy left while it comes back
    holds nothing newer)."""
    found, copied = [], 0
    for agent in archived.addresses():
        if agent in held or not (events := await archived.events(agent)):
            continue
        for start in range(0, len(events), PAGE):
            await store.record_events(tuple(events[start : start + PAGE]))
        await store.mark_archived(agent, archived=True)
        found.append(agent)
        copied += len(events)
    return found, copied


async def _copy_specs(ingress: AsyncIngress, store: ReadSide, tenant: str) -> int:
    versions = (await ingress.call(SPECS, Empty(), tenant)).versions
    for published in versions:
        await store.record_spec(published)
    return len(versions)


async def _copy_keys(ingress: AsyncIngress, store: ReadSide, tenant: str) -> int:
    keys = (await ingress.call(KEYS, Empty(), tenant)).keys
    for key in keys:
        await store.record_key(key)
    return len(keys)


async def _copy_documents(ingress: AsyncIngress, store: ReadSide, tenant: str) -> int:
    """The tenant's documents, each with its passages once released."""
    listed = (await ingress.call(DOCUMENTS, Empty(), tenant)).documents
    for document in listed:
        indexed = await ingress.call(INDEXED_DOCUMENT, DocumentRef(document.id), tenant)
        await store.record_document(indexed)
    return len(listed)


async def _copy_memories(ingress: AsyncIngress, store: ReadSide, scope: str) -> int:
    """The scope's records, page by page (a forgotten record's key is cleared: none of it
    comes back)."""
    after, copied = "", 0
    while True:
        page = await ingress.call(MEMORY_RECORDS, MemoryPage(after, PAGE), scope)
        if page.records:
            await store.record_memories(page.records)
            copied += len(page.records)
            after = page.records[-1].id
        if not page.more or not page.records:
            return copied
