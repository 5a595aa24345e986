"""Kernel-enforced limits: the command's own cgroups (v1 memory and pids, as root)."""

from __future__ import annotations

import subprocess

from schemas.sandbox import CommandLimits
from services.workspace.cgroups import Cgroups

LIMITS = CommandLimits(memory_mb=64, processes=8)


def made() -> Cgroups:
    cgroups = Cgroups.make(LIMITS)
    assert cgroups is not None, "this machine has the v1 memory and pids controllers"
    return cgroups


def test_memory_past_the_limit_is_killed_by_the_kernel() -> None:
    cgroups = made()
    try:
        ran = subprocess.run(
            cgroups.wrap(["python3", "-c", "b = bytearray(300 * 2**20); print('lived')"]),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert ran.returncode == -9
        assert b"lived" not in ran.stdout
        assert cgroups.passed() == "memory"
    finally:
        cgroups.kill()
        cgroups.remove()
    assert not cgroups.memory.exists()
    assert not cgroups.pids.exists()


def test_a_fork_past_the_process_limit_fails_in_the_kernel() -> None:
    cgroups = made()
    try:
        ran = subprocess.run(
            cgroups.wrap(["sh", "-c", "for i in $(seq 30); do sleep 5 & done; echo started"]),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert b"Cannot fork" in ran.stderr
        assert cgroups.passed() == "processes"
        assert len((cgroups.pids / "cgroup.procs").read_text().split()) <= LIMITS.processes
    finally:
        cgroups.kill()
        cgroups.remove()
    assert not cgroups.pids.exists()
