"""Kernel-enforced memory and process limits for one command, where the machine has the
cgroup v1 `memory` and `pids` controllers mounted and writable (run as root).

Each command gets a cgroup of its own in both hierarchies, under the service's own: its
`memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, where swap is accounted) is
the command's memory limit, so past it the kernel's OOM killer ends a process of the
command at once, whatever the watchdog's last sample said; its `pids.max` is the process
limit, so a fork past it fails in the kernel. The command enters both before bwrap starts
(a shell writes its own pid into them and execs bwrap), so every process it makes is
counted. Afterwards the counters say which limit was met, any process left is killed, and
the cgroups are removed.

Where these controllers are not available (cgroup v2 only, or not root), nothing here
applies and the watchdog and per-process rlimits are the limits (docs/workspaces.md).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from schemas.sandbox import CommandLimits, LimitName

ROOT = Path("/sys/fs/cgroup")
REMOVE_SECONDS = 5.0
STALE_SECONDS = 600.0


def _own(controller: str) -> Path | None:
    """The service's own cgroup in `controller`'s v1 hierarchy, when it is mounted at
    /sys/fs/cgroup/<controller> and writable."""
    mount = ROOT / controller
    if os.geteuid() != 0 or not (mount / "cgroup.procs").is_file():
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            own = mount / path.lstrip("/")
            return own if os.access(own, os.W_OK) else None
    return None


def _sweep(*bases: Path) -> None:
    """Remove the empty cgroups of commands whose service died before it removed them
    (a crash, a kill): old enough that none is a command still entering its own."""
    now = time.time()  # noqa: TID251 - compared with a file's mtime, never journaled
    for base in bases:
        for group in base.glob("teaspill-*"):
            with contextlib.suppress(OSError):
                if now - group.stat().st_mtime > STALE_SECONDS:
                    group.rmdir()  # fails while a process is in it


@dataclass(frozen=True)
class Cgroups:
    memory: Path
    pids: Path

    @classmethod
    def make(cls, limits: CommandLimits) -> Cgroups | None:
        """A memory and a pids cgroup with the command's limits; None where the machine
        has no v1 controllers this service may use."""
        memory_base, pids_base = _own("memory"), _own("pids")
        if memory_base is None or pids_base is None:
            return None
        _sweep(memory_base, pids_base)
        name = f"teaspill-{secrets.token_hex(6)}"
        made = cls(memory_base / name, pids_base / name)
        try:
            made.memory.mkdir()
            made.pids.mkdir()
            limit = str(limits.memory_mb * 2**20)
            (made.memory / "memory.limit_in_bytes").write_text(limit)
            swap = made.memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(limit)
            # bwrap's own two processes (itself and the sandbox's init) count too, so a
            # fork bomb meets this limit before the per-uid rlimit and is ended at once.
            (made.pids / "pids.max").write_text(str(limits.processes))
        except OSError:
            made.remove()
            return None
        return made

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv`, started from inside both cgroups."""
        enter = 'echo 0 > "$1/cgroup.procs" && echo 0 > "$2/cgroup.procs" && shift 2 && exec "$@"'
        return ["/bin/sh", "-c", enter, "sh", str(self.memory), str(self.pids), *argv]

    def passed(self) -> LimitName | None:
        """The limit the kernel enforced, if it did."""
        with contextlib.suppress(OSError, ValueError):
            control = (self.memory / "memory.oom_control").read_text().split()
            if "oom_kill" in control and int(control[control.index("oom_kill") + 1]) > 0:
                return "memory"
        with contextlib.suppress(OSError, ValueError):
            events = (self.pids / "pids.events").read_text().split()
            if "max" in events and int(events[events.index("max") + 1]) > 0:
                return "processes"
        return None

    def kill(self) -> None:
        """Every process still in the command's cgroups."""
        for group in (self.memory, self.pids):
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)

    def remove(self) -> None:
        """Once the processes killed have left (the kernel takes a moment to reap a
        killed PID namespace), the cgroups go."""
        deadline = time.monotonic() + REMOVE_SECONDS
        for group in (self.memory, self.pids):
            while True:
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.005)
