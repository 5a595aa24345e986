"""Operator commands: API keys, specs, the agent catalog, projections.

Making a key and rebuilding the projections go to Restate ingress (the first key of a
tenant cannot come from the gateway, which needs a key; the rebuild has no route); the
rest goes through the gateway with the typed client.
"""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.spec import AgentSpec
from schemas.tenant import Scope
from services.client import Client, KeyInfo
from services.contracts import ADD_KEY, REBUILD, REBUILD_KEY, Empty
from services.ingress import Ingress
from services.keys import new_key


def keys_create(ingress: Ingress, tenant: str, scope: Scope) -> None:
    plaintext, key = new_key(tenant, scope, datetime.now(UTC))
    ingress.call(ADD_KEY, key, tenant)
    print(f"Created {scope} key {key.id} for tenant {tenant}. It is shown this once:")
    print(plaintext)


def keys_list(client: Client, tenant: str) -> None:
    keys = client.keys()
    if not keys:
        print(f"Tenant {tenant} has no keys.")
    for key in keys:
        print(_key_line(key))


def keys_revoke(client: Client, key_id: str) -> None:
    print(f"Revoked: {_key_line(client.revoke_key(key_id))}")


def _key_line(key: KeyInfo) -> str:
    created = datetime.fromisoformat(key.created_at)
    revoked = (
        f"revoked {datetime.fromisoformat(key.revoked_at):%Y-%m-%d %H:%M}"
        if key.revoked_at
        else "active"
    )
    return f"{key.id}  {key.scope:5}  created {created:%Y-%m-%d %H:%M}  {revoked}"


def specs_publish(client: Client, tenant: str, spec: AgentSpec) -> None:
    published = client.publish(spec)
    print(f"Published {published.spec.kind} version {published.spec.version} for {tenant}.")


def specs_list(client: Client, tenant: str) -> None:
    versions = client.specs()
    if not versions:
        print(f"Tenant {tenant} has published no specs.")
    for published in versions:
        spec = published.spec
        when = f"{published.published_at:%Y-%m-%d %H:%M}"
        print(f"{spec.kind:20} v{spec.version:<4} {spec.model:10} {when}")


def agents_list(client: Client, kind: str | None, status: str | None) -> None:
    found = False
    for row in client.agents(kind=kind, status=status):
        found = True
        print(
            f"{row.address:40} {row.kind:16} {row.status:8} turn {row.turn:<4} "
            f"seq {row.last_seq:<6} {row.last_activity}"
        )
    if not found:
        print("No agents yet.")


def projections_rebuild(ingress: Ingress) -> None:
    print("Rebuilding the projections from every agent's timeline and every tenant...")
    report = ingress.call(REBUILD, Empty(), REBUILD_KEY)
    print(
        f"Rebuilt: {report.agents} agents, {report.events} events, "
        f"{report.specs} spec versions, {report.keys} keys."
    )
