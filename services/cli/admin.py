"""Operator commands: API keys, specs, the agent catalog, projections."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from schemas.catalog import ApiKey, KeyRef, Scope
from schemas.spec import AgentSpec
from services.contracts import (
    ADD_KEY,
    KEYS,
    PUBLISH,
    REBUILD,
    REBUILD_KEY,
    REVOKE_KEY,
    SPECS,
    Empty,
)
from services.ingress import Ingress
from services.keys import new_key
from services.projection.store import ProjectionStore
from services.settings import Settings


def keys_create(ingress: Ingress, tenant: str, scope: Scope) -> None:
    plaintext, key = new_key(tenant, scope, datetime.now(UTC))
    ingress.call(ADD_KEY, key, tenant)
    print(f"Created {scope} key {key.id} for tenant {tenant}. It is shown this once:")
    print(plaintext)


def keys_list(ingress: Ingress, tenant: str) -> None:
    keys = ingress.call(KEYS, Empty(), tenant).keys
    if not keys:
        print(f"Tenant {tenant} has no keys.")
    for key in keys:
        print(_key_line(key))


def keys_revoke(ingress: Ingress, tenant: str, key_id: str) -> None:
    print(f"Revoked: {_key_line(ingress.call(REVOKE_KEY, KeyRef(key_id), tenant))}")


def _key_line(key: ApiKey) -> str:
    revoked = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
    return f"{key.id}  {key.scope:5}  created {key.created_at:%Y-%m-%d %H:%M}  {revoked}"


def specs_publish(ingress: Ingress, tenant: str, spec: AgentSpec) -> None:
    published = ingress.call(PUBLISH, spec, tenant)
    print(f"Published {published.spec.kind} version {published.spec.version} for {tenant}.")


def specs_list(ingress: Ingress, tenant: str) -> None:
    versions = ingress.call(SPECS, Empty(), tenant).versions
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
    report = ingress.call(REBUILD, Empty(), REBUILD_KEY)
    print(
        f"Rebuilt: {report.agents} agents, {report.events} events, "
        f"{report.specs} spec versions, {report.keys} keys."
    )
