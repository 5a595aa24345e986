"""The operator's limits on the disk, with real bwrap: /tmp and /dev/shm are bounded, and
the disk holding the home keeps its reserve."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.chat import ToolCall
from schemas.sandbox import WorkspaceSettings
from schemas.workspace import WorkspaceCall
from services.workspace.tools import WorkspaceHost

FILL = "i=0; while head -c 4000000 /dev/zero > {where}/f$i; do i=$((i+1)); done; du -sk {where}"


def run(host: WorkspaceHost, command: str, key: str = "k1") -> str:
    call = WorkspaceCall(
        "acme.box",
        ToolCall("c1", "run_command", {"command": command}),
        key,
        WorkspaceSettings(quota_mb=1024),
    )
    reply = asyncio.run(host.perform(call, lambda: False))
    return reply.result.content


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm"])
def test_filling_tmp_stops_at_its_size_with_a_sentence(tmp_path: Path, where: str) -> None:
    said = run(WorkspaceHost(tmp_path, "bwrap", tmp_mb=8), FILL.format(where=where))
    assert "A write found no space left: /tmp and /dev/shm hold 8 MB each" in said
    used_kb = int(said.strip().splitlines()[-1].split()[0])
    assert used_kb <= 8 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A disk of the test's own: a tmpfs of 256 MB and 12,000 inodes (root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    options = "size=256m,nr_inodes=12000,mode=0755"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def test_a_command_filling_the_disk_stops_at_the_reserve_and_later_ones_are_refused(
    small_disk: Path,
) -> None:
    host = WorkspaceHost(small_disk, "bwrap", reserve_mb=128)
    said = run(host, FILL.format(where="."))
    assert said.startswith("Killed with its whole process tree")
    assert "passed its disk reserve limit" in said
    assert shutil.disk_usage(small_disk).free > 100 * 2**20
    refused = run(host, "echo ran > ran.txt", key="k2")
    assert refused.startswith("Commands are refused for now: the disk that holds the workspaces")
    assert "TEASPILL_DISK_RESERVE_MB" in refused
    assert not list(small_disk.rglob("ran.txt"))


def test_a_command_making_files_without_end_stops_at_the_inode_reserve(small_disk: Path) -> None:
    host = WorkspaceHost(small_disk, "bwrap", reserve_mb=1)
    said = run(host, "i=0; while touch f$i; do i=$((i+1)); done")
    assert "passed its disk reserve limit" in said
    assert os.statvfs(small_disk).f_favail > 9_000
    refused = run(host, "echo ran > ran.txt", key="k2")
    assert "inodes free, at or below what it keeps in reserve" in refused


def test_another_agents_command_runs_while_one_forks_without_end(tmp_path: Path) -> None:
    host = WorkspaceHost(tmp_path, "bwrap")

    async def both() -> tuple[str, str, float]:
        def call(agent: str, command: str) -> WorkspaceCall:
            return WorkspaceCall(agent, ToolCall("c1", "run_command", {"command": command}), agent)

        bomb = asyncio.create_task(
            host.perform(call("acme.bomb", "f(){ f|f& };f; sleep 5"), lambda: False)
        )
        started = asyncio.get_running_loop().time()
        other = await host.perform(call("acme.other", "echo still here"), lambda: False)
        took = asyncio.get_running_loop().time() - started
        return (await bomb).result.content, other.result.content, took

    bombed, other, took = asyncio.run(both())
    assert "passed its processes limit (64 processes)" in bombed
    assert float(bombed.split(" after ")[1].split(" s")[0]) < 4  # killed, not its sleep's end
    assert other.startswith("Exit status 0")
    assert "still here" in other
    assert took < 5


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("touch a; fallocate --keep-size -l 50M a", "fallocate failed: Operation not permitted"),
        ("fallocate -l 50M a", "File size limit exceeded"),
        ("for i in $(seq 4000); do mkdir d$i; done", "past its quota"),
    ],
)
def test_preallocation_and_folders_count_against_the_quota(
    tmp_path: Path, command: str, says: str
) -> None:
    call = WorkspaceCall(
        "acme.box",
        ToolCall("c1", "run_command", {"command": f"{command}; du -sk ."}),
        "k1",
        WorkspaceSettings(quota_mb=1),
    )
    reply = asyncio.run(WorkspaceHost(tmp_path, "bwrap").perform(call, lambda: False))
    assert says in reply.result.content
    used_kb = int(reply.result.content.strip().splitlines()[-1].split()[0])
    assert used_kb < 20 * 1024
