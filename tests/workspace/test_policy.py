"""The operator's sandbox policy, checked again where commands run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from schemas.chat import ToolCall
from schemas.sandbox import Ceilings, CommandLimits, SandboxPolicy, WorkspaceSettings
from schemas.workspace import WorkspaceCall
from services.workspace.tools import WorkspaceHost

POLICY = SandboxPolicy(frozenset({"granted"}), Ceilings(quota_mb=512, memory_mb=1024))


def perform(tmp_path: Path, agent: str, settings: WorkspaceSettings) -> tuple[str, str]:
    host = WorkspaceHost(tmp_path, "bwrap", POLICY)
    call = WorkspaceCall(
        agent, ToolCall("c1", "run_command", {"command": "echo ran > ran.txt"}), "k1", settings
    )
    reply = asyncio.run(host.perform(call, lambda: False))
    return reply.result.status, reply.result.content


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (
            WorkspaceSettings(network=True),
            "the operator has not granted the network to tenant 'acme'",
        ),
        (
            WorkspaceSettings(quota_mb=513),
            "field 'workspace.quota_mb' is 513, above this deployment's ceiling of 512",
        ),
        (
            WorkspaceSettings(limits=CommandLimits(memory_mb=2000)),
            "field 'workspace.limits.memory_mb' is 2000, above this deployment's ceiling of 1024",
        ),
    ],
)
def test_a_command_outside_the_policy_is_refused_and_nothing_runs(
    tmp_path: Path, settings: WorkspaceSettings, says: str
) -> None:
    status, content = perform(tmp_path, "acme.box", settings)
    assert status == "error"
    assert says in content
    assert not list(tmp_path.rglob("ran.txt"))


def test_a_command_inside_the_policy_runs(tmp_path: Path) -> None:
    status, content = perform(tmp_path, "acme.box", WorkspaceSettings(quota_mb=512))
    assert (status, content.splitlines()[0][:13]) == ("ok", "Exit status 0")
    assert list(tmp_path.rglob("ran.txt"))
