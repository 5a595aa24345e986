"""Operator commands: API keys, specs, the agent catalog, projections."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import msgspec

from schemas.catalog import ApiKey, KeyRef, Keys, PublishedSpec, RebuildReport, Scope, SpecVersions
from schemas.spec import AgentSpec
from services.ingress import Ingress
from services.keys import new_key
from services.projection.store import ProjectionStore
from services.settings import Settings


def keys_create(ingress: Ingress, tenant: str, scope: Scope) -> None:
    plaintext, key = new_key(tenant, scope, datetime.now(UTC))
    ingress.call(f"/Tenant/{tenant}/add_key", msgspec.json.encode(key))
    print(f"Created {scope} key {key.id} for tenant {tenant}. It is shown this once:")
    print(plaintext)


def keys_list(ingress: Ingress, tenant: str) -> None:
    keys = msgspec.json.decode(ingress.call(f"/Tenant/{tenant}/keys"), type=Keys).keys
    if not keys:
        print(f"Tenant {tenant} has no keys.")
    for key in keys:
        print(_key_line(key))


def keys_revoke(ingress: Ingress, tenant: str, key_id: str) -> None:
    raw = ingress.call(f"/Tenant/{tenant}/revoke_key", msgspec.json.encode(KeyRef(key_id)))
    print(f"Revoked: {_key_line(msgspec.json.decode(raw, type=ApiKey))}")


def _key_line(key: ApiKey) -> str:
    revoked = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
    return f"{key.id}  {key.scope:5}  created {key.created_at:%Y-%m-%d %H:%M}  {revoked}"


def specs_publish(ingress: Ingress, tenant: str, spec: AgentSpec) -> None:
    raw = ingress.call(f"/Tenant/{tenant}/publish", msgspec.json.encode(spec))
    published = msgspec.json.decode(raw, type=PublishedSpec)
    print(f"Published {published.spec.kind} version {published.spec.version} for {tenant}.")


def specs_list(ingress: Ingress, tenant: str) -> None:
    raw = ingress.call(f"/Tenant/{tenant}/specs")
    versions = msgspec.json.decode(raw, type=SpecVersions).versions
    if not versions:
        print(f"Tenant {tenant} has published no specs.")
    for published in versions:
        spec = published.spec
        when = f"{published.published_at:%Y-%m-%d %H:%M}"
        print(f"{spec.kind:20} v{spec.version:<4} {spec.model:10} {when}")


def agents_list(settings: Settings, tenant: str, kind: str | None, status: str | None) -> None:
    async def read() -> None:
        path = settings.home / "projection.db"
        if not path.exists():
            print("No agents yet: the projection is empty.")
            return
        async with await ProjectionStore.open(path, readonly=True) as store:
            after = ""
            while rows := await store.agents(tenant, kind=kind, status=status, after=after):
                for row in rows:
                    print(
                        f"{row.address:40} {row.kind:16} {row.status:8} turn {row.turn:<4} "
                        f"seq {row.last_seq:<6} {row.last_activity}"
                    )
                after = rows[-1].address

    asyncio.run(read())


def projections_rebuild(ingress: Ingress) -> None:
    print("Rebuilding the projections from every agent's timeline and every tenant...")
    report = msgspec.json.decode(ingress.call("/Projector/all/rebuild"), type=RebuildReport)
    print(
        f"Rebuilt: {report.agents} agents, {report.events} events, "
        f"{report.specs} spec versions, {report.keys} keys."
    )
