"""The sandbox with real bwrap, no Restate: what a command sees, and its limits."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import msgspec
import pytest

from schemas.sandbox import CommandLimits
from services.workspace.files import open_workspace
from services.workspace.sandbox import (
    Mounts,
    Outcome,
    SandboxUnavailableError,
    find_bwrap,
    run_sandboxed,
)

LIMITS = CommandLimits(
    wall_seconds=30, cpu_seconds=1, memory_mb=64, processes=16, output_bytes=100_000
)


def run(
    tmp_path: Path,
    command: str,
    *,
    parent: Path | None = None,
    bwrap: str = "bwrap",
    limits: CommandLimits = LIMITS,
) -> Outcome:
    workspace = open_workspace(tmp_path / "home", "acme.box", 2**20)
    mounts = Mounts(workspace.root, workspace.uid, parent)
    return asyncio.run(
        run_sandboxed(
            mounts, bwrap, command, limits=limits, file_bytes=2**20, stopped=lambda: False
        )
    )


def test_the_workspace_is_the_only_writable_place(tmp_path: Path) -> None:
    outcome = run(tmp_path, "echo made > made.txt; touch /etc/x /usr/x /x 2>&1; ls /")
    said = outcome.output.decode()
    assert outcome.exit_code == 0
    assert said.count("Read-only file system") == 2
    assert "cannot touch '/x'" in said
    assert set(said.split()) >= {"usr", "etc", "workspace", "tmp", "proc"}
    assert "home" not in said.split()
    assert "root" not in said.split()
    assert (tmp_path / "home/workspaces/acme/acme.box/made.txt").read_text() == "made\n"


def test_a_lent_parent_workspace_is_read_only(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "plan.txt").write_text("the plan")
    outcome = run(tmp_path, "cat /parent/plan.txt; echo x > /parent/y", parent=parent)
    assert outcome.output.decode().startswith("the plan")
    assert "Read-only file system" in outcome.output.decode()
    assert not (parent / "y").exists()


def test_the_command_sees_only_its_own_processes(tmp_path: Path) -> None:
    outcome = run(tmp_path, "ls /proc | grep -c '^[0-9]'")
    assert int(outcome.output.decode()) <= 5


@pytest.mark.parametrize(
    ("command", "limit"),
    [
        ("sleep 60", "wall time"),
        ("while :; do :; done", "cpu time"),
        ("yes", "output"),
        ("python3 -c 'x = [b\"x\" * (2**20 + i) for i in range(300)]'", "memory"),
        ("f(){ f|f& };f; sleep 2", "processes"),
        ("head -c 5000000 /dev/zero > big", "quota"),
    ],
)
def test_a_command_past_a_limit_is_killed_and_the_limit_named(
    tmp_path: Path, command: str, limit: str
) -> None:
    wall = 3 if limit == "wall time" else LIMITS.wall_seconds
    outcome = run(tmp_path, command, limits=msgspec.structs.replace(LIMITS, wall_seconds=wall))
    assert outcome.limit == limit
    assert outcome.seconds < wall + 2


def test_a_missing_bwrap_is_a_sentence_and_nothing_runs(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError, match="never run outside the sandbox"):
        find_bwrap(str(tmp_path / "bwrap"))


def test_a_sandbox_that_cannot_start_fails_closed(tmp_path: Path) -> None:
    fake = tmp_path / "fakebwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: no permission to create a namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailableError, match="no permission to create a namespace"):
        run(tmp_path, "echo ran > ran.txt", bwrap=str(fake))
    assert not (tmp_path / "home/workspaces/acme/acme.box/ran.txt").exists()


def test_a_bwrap_that_cannot_be_executed_fails_closed(tmp_path: Path) -> None:
    not_a_program = tmp_path / "bwrap"
    not_a_program.write_text("not a program")
    with pytest.raises(SandboxUnavailableError, match="could not be started"):
        run(tmp_path, "echo ran", bwrap=str(not_a_program))


SYSCALLS = """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def refused(number, *args):
    return libc.syscall(number, *args) == -1 and ctypes.get_errno()
print("bpf", refused(321, 0, 0, 0))
print("keyctl", refused(250, 0, 0, 0))
print("add_key", refused(248, b"user", b"k", b"v", 1, 0))
print("ptrace", refused(101, 16, 1, 0, 0))
print("unshare", refused(272, 0x10000000))
print("clone_newnet", refused(56, 0x40000000 | 17, 0, 0, 0, 0))
print("mount", refused(165, b"none", b"/tmp", b"tmpfs", 0, 0))
print("perf_event_open", refused(298, 0, 0, -1, -1, 0))
print("clone3", refused(435, 0, 0))
folder = os.open(".", os.O_RDONLY)
print("btrfs_snapshot", refused(16, folder, 0x50009417, bytes(4096)))
print("ficlone", refused(16, folder, 0x40049409, folder))
print("fioclex", refused(16, folder, 0x5451))
child = os.fork()
if child == 0:
    os._exit(0)
print("forked", os.waitpid(child, 0)[1])
print("spawned", subprocess.run(["true"]).returncode)
"""


def test_the_system_call_filter_refuses_what_a_command_never_needs(tmp_path: Path) -> None:
    outcome = run(tmp_path, f"python3 - <<'EOF'\n{SYSCALLS}\nEOF")
    said = dict(line.split() for line in outcome.output.decode().splitlines())
    assert outcome.exit_code == 0, said
    refused = ("bpf", "keyctl", "add_key", "ptrace", "unshare", "clone_newnet", "mount")
    assert {name: said[name] for name in refused} == dict.fromkeys(refused, "1")  # EPERM
    assert said["perf_event_open"] == "1"
    assert said["clone3"] == "38"  # ENOSYS: the C library falls back to clone
    assert said["btrfs_snapshot"] == said["ficlone"] == "25"  # ENOTTY: no btrfs ioctls
    assert said["fioclex"] == "False"  # other ioctls pass
    assert said["forked"] == "0"
    assert said["spawned"] == "0"


def test_a_command_cannot_make_namespaces(tmp_path: Path) -> None:
    outcome = run(tmp_path, "unshare -U true; unshare -n true; unshare -m true; echo done")
    said = outcome.output.decode()
    assert said.count("Operation not permitted") == 3
    assert said.strip().endswith("done")


def test_network_without_its_programs_is_refused_with_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    monkeypatch.setenv("PATH", str(tmp_path))
    workspace = open_workspace(tmp_path / "home", "acme.box", 2**20)
    mounts = Mounts(workspace.root, workspace.uid, network=True)
    with pytest.raises(
        SandboxUnavailableError, match="nsenter, nft, slirp4netns, ip are not installed"
    ):
        asyncio.run(
            run_sandboxed(
                mounts, bwrap, "echo ran > ran.txt", limits=LIMITS, file_bytes=2**20,
                stopped=lambda: False,
            )
        )  # fmt: skip
    assert not (workspace.root / "ran.txt").exists()


def test_commands_with_network_at_once_each_get_their_own_interface(tmp_path: Path) -> None:
    """Each sandbox's pipes are closed once: a second close of a number another sandbox
    had been given since ended that one's slirp4netns (its interface gone)."""

    async def one(index: int) -> str:
        workspace = open_workspace(tmp_path / "home", f"acme.n{index}", 2**20)
        mounts = Mounts(workspace.root, workspace.uid, network=True)
        outcome = await run_sandboxed(
            mounts, "bwrap", "ip -4 -o addr show tap0", limits=LIMITS, file_bytes=2**20,
            stopped=lambda: False,
        )  # fmt: skip
        return outcome.output.decode()

    async def rounds() -> list[str]:
        said: list[str] = []
        for _ in range(3):
            said += await asyncio.gather(*(one(index) for index in range(8)))
        return said

    said = asyncio.run(rounds())
    assert all("inet 10.0.2.100/24" in each for each in said), said
