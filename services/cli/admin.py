"""Operator commands: API keys, specs, the agent catalog, projections.

Making a key and rebuilding the projections go to Restate ingress (the first key of a
tenant cannot come from the gateway, which needs a key; the rebuild has no route); the
rest goes through the gateway with the typed client.
"""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.spec import AgentSpec
from schemas.tenant import Scope
from services.cli.errors import UsageError
from services.cli.table import table
from services.client import Client, KeyInfo
from services.contracts import ADD_KEY, REBUILD, REBUILD_KEY, Empty
from services.ingress import Ingress
from services.keys import PUBLISHABLE, new_key, publishable_problem, valid_name


def keys_create(
    ingress: Ingress,
    tenant: str,
    scope: Scope,
    name: str,
    *,
    origins: tuple[str, ...] = (),
    kinds: tuple[str, ...] = (),
) -> None:
    if not valid_name(name):
        raise UsageError(
            f"The key name {name!r} cannot be used: a name has up to 60 letters, digits, "
            "spaces and . _ @ - only."
        )
    if (problem := publishable_problem(scope, origins, kinds)) is not None:
        raise UsageError(f"The key cannot be made: {problem} (--origin, --kind).")
    plaintext, key = new_key(tenant, scope, datetime.now(UTC), name, origins=origins, kinds=kinds)
    ingress.call(ADD_KEY, key, tenant)
    named = f" ({name})" if name else ""
    print(f"Created {scope} key {key.id}{named} for tenant {tenant}. It is shown this once:")
    print(plaintext)
    if scope == PUBLISHABLE:
        print(
            f"It is valid from {', '.join(origins)} for {', '.join(kinds)}, with an end-user "
            "token (`teaspill users set`)."
        )


KEY_HEADERS = ("ID", "NAME", "SCOPE", "CREATED", "STATE")


def keys_list(client: Client, tenant: str) -> None:
    keys = client.keys()
    if not keys:
        print(f"Tenant {tenant} has no keys: `teaspill keys create {tenant}` makes one.")
        return
    print(table(KEY_HEADERS, [_key_row(key) for key in keys]))


def keys_revoke(client: Client, key_id: str) -> None:
    print("Revoked:")
    print(table(KEY_HEADERS, [_key_row(client.revoke_key(key_id))]))


def _key_row(key: KeyInfo) -> tuple[str, ...]:
    created = datetime.fromisoformat(key.created_at)
    revoked = (
        f"revoked {datetime.fromisoformat(key.revoked_at):%Y-%m-%d %H:%M}"
        if key.revoked_at
        else "active"
    )
    return (key.id, key.name or "-", key.scope, f"{created:%Y-%m-%d %H:%M}", revoked)


def specs_publish(client: Client, tenant: str, spec: AgentSpec) -> None:
    published = client.publish(spec)
    print(f"Published {published.spec.kind} version {published.spec.version} for {tenant}.")


def specs_list(client: Client, tenant: str) -> None:
    versions = client.specs()
    if not versions:
        print(
            f"Tenant {tenant} has published no specs: "
            f"`teaspill specs publish {tenant} examples/assistant.toml` publishes one."
        )
        return
    rows = [
        (p.spec.kind, p.spec.version, p.spec.model, f"{p.published_at:%Y-%m-%d %H:%M}")
        for p in versions
    ]
    print(table(("KIND", "VERSION", "MODEL", "PUBLISHED"), rows))


def agents_list(client: Client, tenant: str, kind: str | None, status: str | None) -> None:
    rows = [
        (r.address, r.kind, r.status, r.turn, r.last_seq, r.last_activity)
        for r in client.agents(kind=kind, status=status)
    ]
    if not rows:
        which = " that match" if kind or status else ""
        print(f"Tenant {tenant} has no agents{which} yet.")
        return
    print(table(("ADDRESS", "KIND", "STATUS", "TURN", "SEQ", "LAST ACTIVITY"), rows))


def deployment(client: Client, tenant: str) -> None:
    """What the deployment offers `tenant`, as the deployment itself says."""
    offered = client.deployment()
    if offered.checked:
        print(f"Models: {', '.join(offered.models) or 'none'}")
        print(f"Tools:  {', '.join(offered.tools) or 'none'}")
    else:
        print("This deployment does not check model and tool names: any spec publishes.")
    if offered.problem:
        print(offered.problem)
    if not offered.kinds:
        print(f"Kinds:  none published for {tenant} yet (`teaspill specs publish`).")
        return
    print(f"Kinds published for {tenant}:")
    print(
        table(("KIND", "VERSION", "MODEL"), [(k.kind, k.version, k.model) for k in offered.kinds])
    )


def projections_rebuild(ingress: Ingress) -> None:
    print("Rebuilding the projections from every agent's timeline and every tenant...")
    report = ingress.call(REBUILD, Empty(), REBUILD_KEY)
    print(
        f"Rebuilt: {report.agents} agents, {report.events} events, "
        f"{report.specs} spec versions, {report.keys} keys, {report.documents} documents, "
        f"{report.memories} memories."
    )
