"""The gateway reads the projection and reaches agents only through ingress."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import msgspec

from services.gateway.app import create_app
from services.settings import Settings

GATEWAY = Path(__file__).resolve().parents[2] / "services" / "gateway"
ALLOWED = (
    "schemas",
    "services.gateway",
    "services.keys",
    "services.endusers",
    "services.settings",
    "services.projection.store",
    "services.projection.stores",
    "services.projection.tallies",
    # The embeddings server's client: a query's vector for hybrid ranking (no store in it).
    "services.projection.embeddings",
    "services.contracts",
    "services.ingress",
    "services.specs",
    # Pure: what a schedule's clock and a hook's template accept, checked at the edge too.
    "services.schedules.timing",
    "services.hooks.template",
    # The process's tracer: spans and the traceparent its ingress calls carry on.
    "services.observe",
)


def our_imports() -> set[str]:
    found: set[str] = set()
    for path in GATEWAY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return {m for m in found if m.split(".")[0] in ("schemas", "services", "restate")}


def test_the_gateway_imports_no_agent_code_no_restate_sdk_and_no_projection_writer() -> None:
    assert {m for m in our_imports() if not m.startswith(ALLOWED)} == set()


def test_the_ingress_client_and_the_contracts_import_no_restate_sdk() -> None:
    services = GATEWAY.parent
    for module in ("contracts.py", "ingress.py"):
        tree = ast.parse((services / module).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m and m.split(".")[0] == "restate"}, module


def test_the_gateway_never_calls_a_projection_write() -> None:
    writes = ("record_events", "record_spec", "record_key", "executescript", "commit")
    for path in GATEWAY.rglob("*.py"):
        text = path.read_text()
        assert not [w for w in writes if f".{w}(" in text], path


def test_the_projection_is_opened_read_only() -> None:
    reader = (GATEWAY / "reader.py").read_text()
    assert "mode=ro" in reader  # SQLite's file
    assert "readonly=True" in reader  # PostgreSQL's sessions


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_every_reference_in_the_openapi_description_resolves(tmp_path: Path) -> None:
    """A client generator stops at a `$ref` to nothing: each names a published component."""
    schema = create_app(Settings(home=tmp_path)).openapi()
    components = schema["components"]["schemas"]
    prefix = "#/components/schemas/"
    refs = set(_refs(schema))
    assert sorted(r for r in refs if r.removeprefix(prefix) not in components) == []
    assert {"MemoryRecord", "MemoryList", "MemoryHitList"} <= {r.removeprefix(prefix) for r in refs}


def test_every_route_is_in_the_openapi_description(tmp_path: Path) -> None:
    schema = create_app(Settings(home=tmp_path)).openapi()
    routes = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert routes == {
        ("POST", "/v1/agents/{address}/messages"),
        ("GET", "/v1/agents/{address}"),
        ("GET", "/v1/agents"),
        ("GET", "/v1/agents/{address}/timeline"),
        ("GET", "/v1/agents/{address}/events"),
        ("GET", "/v1/agents/{address}/artifacts/{sha256}"),
        ("POST", "/v1/agents/{address}/approvals/{request_id}"),
        ("POST", "/v1/agents/{address}/stop"),
        ("POST", "/v1/agents/{address}/pause"),
        ("POST", "/v1/agents/{address}/resume"),
        ("POST", "/v1/agents/{address}/schedules"),
        ("GET", "/v1/agents/{address}/schedules"),
        ("DELETE", "/v1/agents/{address}/schedules/{schedule_id}"),
        ("POST", "/v1/agents/{address}/fork"),
        ("POST", "/v1/agents/{address}/archive"),
        ("POST", "/v1/agents/{address}/unarchive"),
        ("DELETE", "/v1/agents/{address}"),
        ("DELETE", "/v1/tenant"),
        ("POST", "/v1/hooks"),
        ("GET", "/v1/hooks"),
        ("GET", "/v1/hooks/{hook_id}"),
        ("DELETE", "/v1/hooks/{hook_id}"),
        ("POST", "/hooks/{hook_id}"),
        ("POST", "/v1/specs"),
        ("GET", "/v1/specs"),
        ("POST", "/v1/memory"),
        ("GET", "/v1/memory"),
        ("DELETE", "/v1/memory"),
        ("DELETE", "/v1/memory/{memory_id}"),
        ("POST", "/v1/knowledge"),
        ("POST", "/v1/knowledge/pdf"),
        ("GET", "/v1/knowledge"),
        ("GET", "/v1/knowledge/search"),
        ("GET", "/v1/knowledge/{document_id}"),
        ("POST", "/v1/knowledge/{document_id}/release"),
        ("DELETE", "/v1/knowledge/{document_id}"),
        ("GET", "/v1/deployment"),
        ("GET", "/v1/me"),
        ("GET", "/v1/me/conversations"),
        ("PUT", "/v1/end-users"),
        ("GET", "/v1/end-users"),
        ("POST", "/v1/visitors"),
        ("GET", "/v1/keys"),
        ("POST", "/v1/keys"),
        ("POST", "/v1/keys/{key_id}/revoke"),
        ("POST", "/v1/agui"),
        ("POST", "/v1/agents/{address}/page-calls/{request_id}/claim"),
        ("POST", "/v1/agents/{address}/page-calls/{request_id}/result"),
        ("GET", "/v1/health"),
        ("GET", "/metrics"),
        ("POST", "/internal/live"),
        ("POST", "/internal/projected"),
    }
    assert msgspec.json.encode(schema)  # plain JSON all the way down
