"""CPU time used by each part of the stack, read from /proc (Linux).

The stack's parts are this process's children: restate-server, and hypercorn with its
worker (teaspill's endpoint, and the plain loop's when it runs). Each part's CPU is the
sum over its process tree, so a benchmark can say which part spent the machine's cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
PLAIN_APP = "bench.plain:create_app()"
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuTimes:
    """Seconds of CPU (user + system) spent so far."""

    restate: float
    endpoint: float
    client: float
    """This process: the benchmark's own HTTP clients."""
    plain: float = 0.0
    """The plain loop's endpoint (`bench/plain.py`)."""

    def __sub__(self, earlier: CpuTimes) -> CpuTimes:
        return CpuTimes(
            self.restate - earlier.restate,
            self.endpoint - earlier.endpoint,
            self.client - earlier.client,
            self.plain - earlier.plain,
        )


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    cpu: float


def cpu_times() -> CpuTimes:
    procs = list(_processes())
    own = os.times()
    parts = {"restate": 0.0, "endpoint": 0.0, "plain": 0.0}
    for child in (p for p in procs if p.ppid == os.getpid()):
        part = _part(child.pid)
        if part is not None:
            parts[part] += _tree_cpu(child.pid, procs)
    return CpuTimes(parts["restate"], parts["endpoint"], own.user + own.system, parts["plain"])


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) the process `pid` and its children have spent so far."""
    return _tree_cpu(pid, list(_processes()))


def _processes() -> Iterator[_Proc]:
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
            fields = rest.rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        # After "pid (comm)": state ppid ... utime (the 12th) stime (the 13th).
        yield _Proc(int(pid), int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS)


def _part(pid: int) -> str | None:
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if any(arg.endswith(b"restate-server") for arg in argv):
        return "restate"
    if b"hypercorn" in argv:
        return "plain" if PLAIN_APP.encode() in argv else "endpoint"
    return None


def _tree_cpu(root: int, procs: list[_Proc]) -> float:
    total, frontier = 0.0, {root}
    while frontier:
        total += sum(p.cpu for p in procs if p.pid in frontier)
        frontier = {p.pid for p in procs if p.ppid in frontier}
    return total
