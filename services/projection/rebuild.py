"""Rebuilding the projections from the source of truth: every agent's timeline and every
tenant's specs and keys, read through Restate."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from schemas.catalog import Keys, RebuildReport, SpecVersions
from schemas.events import TimelinePage, TimelineQuery
from services.projection.store import ProjectionStore

PAGE = 500


async def rebuild_from_restate(
    store: ProjectionStore, ingress_url: str, admin_url: str
) -> RebuildReport:
    async with httpx.AsyncClient(timeout=60) as http:
        agents = await _keys_of(http, admin_url, "Agent")
        tenants = await _keys_of(http, admin_url, "Tenant")
        events = 0
        for agent in agents:
            events += await _copy_timeline(http, ingress_url, store, agent)
        specs = keys = 0
        for tenant in tenants:
            specs += await _copy_specs(http, ingress_url, store, tenant)
            keys += await _copy_keys(http, ingress_url, store, tenant)
    return RebuildReport(agents=len(agents), events=events, specs=specs, keys=keys)


async def _keys_of(http: httpx.AsyncClient, admin_url: str, service: str) -> list[str]:
    query = f"select distinct service_key from state where service_name = '{service}'"  # noqa: S608
    response = await http.post(
        f"{admin_url}/query", json={"query": query}, headers={"accept": "application/json"}
    )
    response.raise_for_status()
    rows: list[dict[str, Any]] = response.json()["rows"]
    return sorted(str(row["service_key"]) for row in rows)


async def _call(http: httpx.AsyncClient, url: str, body: bytes = b"") -> bytes:
    headers = {"content-type": "application/json"} if body else {}
    response = await http.post(url, content=body, headers=headers)
    response.raise_for_status()
    return response.content


async def _copy_timeline(
    http: httpx.AsyncClient, ingress_url: str, store: ProjectionStore, agent: str
) -> int:
    after = copied = 0
    while True:
        body = msgspec.json.encode(TimelineQuery(after_seq=after, limit=PAGE))
        raw = await _call(http, f"{ingress_url}/Agent/{agent}/timeline", body)
        page = msgspec.json.decode(raw, type=TimelinePage)
        if not page.events:
            return copied
        await store.record_events(page.events)
        copied += len(page.events)
        after = page.events[-1].seq


async def _copy_specs(
    http: httpx.AsyncClient, ingress_url: str, store: ProjectionStore, tenant: str
) -> int:
    raw = await _call(http, f"{ingress_url}/Tenant/{tenant}/specs")
    versions = msgspec.json.decode(raw, type=SpecVersions).versions
    for published in versions:
        await store.record_spec(published)
    return len(versions)


async def _copy_keys(
    http: httpx.AsyncClient, ingress_url: str, store: ProjectionStore, tenant: str
) -> int:
    raw = await _call(http, f"{ingress_url}/Tenant/{tenant}/keys")
    keys = msgspec.json.decode(raw, type=Keys).keys
    for key in keys:
        await store.record_key(key)
    return len(keys)
