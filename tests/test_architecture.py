"""Dependencies point one way; the tree is the architecture diagram."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imports_of(package: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        found |= imports_of_file(path)
    return found


def imports_of_file(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in ("schemas", "services", "tests", "bench")}


def test_schemas_import_nothing_of_ours_but_schemas() -> None:
    assert {m for m in ours(imports_of("schemas")) if not m.startswith("schemas")} == set()


def test_the_harness_imports_only_schemas_and_itself() -> None:
    modules = imports_of("services/harness")
    assert {m for m in ours(modules) if not m.startswith(("schemas", "services.harness"))} == set()
    assert not {m for m in modules if m.startswith("restate")}


def test_the_client_imports_only_schemas_and_itself() -> None:
    """Users install it to talk to a gateway: it must not pull in the services."""
    modules = imports_of("services/client")
    assert {m for m in ours(modules) if not m.startswith(("schemas", "services.client"))} == set()


@pytest.mark.parametrize("package", ["services/harness", "schemas", "services/tools"])
def test_only_the_agent_and_executor_touch_the_restate_context(package: str) -> None:
    assert not {m for m in imports_of(package) if m.split(".")[0] == "restate"}


@pytest.mark.parametrize("module", ["machine", "pipeline"])
def test_what_a_wake_decides_is_pure(module: str) -> None:
    """The wake's state machine and the policy checks: no Restate, no I/O."""
    tree = ast.parse((ROOT / "services" / "agent" / f"{module}.py").read_text())
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {n for n in names if n.split(".")[0] in ("restate", "httpx", "asyncio", "time")}


def test_handlers_are_called_by_contract_not_by_string() -> None:
    """Every Restate handler called by name goes through `services.contracts`."""
    offenders = [
        path.relative_to(ROOT).as_posix()
        for package in ("services", "bench")
        for path in (ROOT / package).rglob("*.py")
        if "generic_call(" in path.read_text()
        or "generic_send(" in path.read_text()
        or '"/Agent/' in path.read_text()
        or 'f"/Tenant/' in path.read_text()
    ]
    # The in-memory context implements the two methods the SDK's context has.
    assert sorted(offenders) == ["services/agent/inline.py", "services/durable.py"]


def test_in_the_agent_only_the_driver_the_store_and_the_handlers_touch_restate() -> None:
    """The machine, the bookkeeping, the pipeline and the timeline are plain code the
    driver calls; the in-memory context stands in for Restate's."""
    touching = {
        path.stem
        for path in (ROOT / "services" / "agent").glob("*.py")
        if any(m.split(".")[0] == "restate" for m in imports_of_file(path))
    }
    assert touching == {"driver", "store", "object", "archiving", "inline"}


def test_the_agent_reaches_the_execution_plane_only_through_restate() -> None:
    plane = ("services.executor", "services.workspace")
    assert not {m for m in imports_of("services/agent") if m.startswith(plane)}


def test_only_the_composition_root_knows_both_planes() -> None:
    both = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "services").rglob("*.py")
        if "services.agent" in path.read_text() and "services.executor" in path.read_text()
    ]
    assert both == ["services/app.py"]


def test_every_package_states_its_invariants_in_a_readme() -> None:
    for package in ("harness", "agent", "executor", "tools", "stack", "workspace", "evals"):
        assert (ROOT / "services" / package / "README.md").is_file(), package


SAME_NAME_ALLOWED = {
    # The HTTP API as the gateway writes it (pydantic, for validation and OpenAPI) and as
    # the client reads it (msgspec, without the services): one contract, seen from each side.
    "Accepted": 2,
    "AgentPage": 2,
    "ApiError": 2,
    "ApprovalAccepted": 2,
    "StopAccepted": 2,
    "HoldAccepted": 2,
}
"""Names two top-level classes may share, and how many hold each; anything else is a twin."""


def test_no_two_classes_share_a_name() -> None:
    """A reader who meets a name meets one thing: a second ingress client, ledger or
    contract of the same name is renamed for its role, or listed above with the reason."""
    holders: dict[str, list[str]] = {}
    for package in ("services", "schemas"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    holders.setdefault(node.name, []).append(path.relative_to(ROOT).as_posix())
    shared = {name: len(paths) for name, paths in holders.items() if len(paths) > 1}
    assert {n: holders[n] for n in shared if n not in SAME_NAME_ALLOWED} == {}
    assert shared == SAME_NAME_ALLOWED, "a listed name no longer has its twin: unlist it"
