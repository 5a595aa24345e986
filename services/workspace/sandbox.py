"""One command in a bubblewrap sandbox (`bwrap.py`), with limits, killed with its whole
tree.

Limits: wall time is a deadline; output is counted as it is read; processes, memory and
CPU are summed over the command's tree by a watchdog that samples it, with per-process
rlimits behind it. Past any of them the tree is killed (bwrap's PID namespace goes with
its first process) and the outcome names the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from schemas.sandbox import Allowed, CommandLimits, LimitName
from services.workspace.bwrap import (
    PATH,
    Mounts,
    Pipes,
    SandboxUnavailableError,
    bwrap_argv,
    find_bwrap,
    prlimit_argv,
)
from services.workspace.cgroups import Cgroups
from services.workspace.network import Attached, NetworkUnavailableError, attach

__all__ = [
    "DiskFloor",
    "Mounts",
    "Outcome",
    "Pipes",
    "SandboxUnavailableError",
    "bwrap_argv",
    "find_bwrap",
    "prlimit_argv",
    "run_sandboxed",
]

SAMPLE_SECONDS = 0.05
INODE_RESERVE = 10_000
FLOOR_SECONDS = 0.002
KEEP_BYTES = 64_000
"""Output kept for the result; the rest is counted, not kept."""
OUT_OF_MEMORY = (b"MemoryError", b"Cannot allocate memory", b"out of memory", b"bad_alloc")
FILE_TOO_BIG = 128 + signal.SIGXFSZ
"""The shell's exit status for a command killed writing past its file size cap."""
CANNOT_FORK = (b"Cannot fork", b"fork: Resource temporarily unavailable", b"fork: retry")
OVER_QUOTA = b"Disk quota exceeded"
"""strerror(EDQUOT): the workspaces' filesystem refused a write past the workspace's quota."""


@dataclass(frozen=True)
class DiskFloor:
    """The disk that holds the workspaces, and the free bytes it keeps (and free inodes: 1%
    of them, at least INODE_RESERVE, so that a loop of empty files cannot exhaust them): a
    command that brings it below is killed."""

    path: Path
    reserve_bytes: int

    def free(self) -> int:
        return shutil.disk_usage(self.path).free

    def short(self) -> str:
        """What the disk is short of, or empty."""
        disk = os.statvfs(self.path)
        if disk.f_bavail * disk.f_frsize <= self.reserve_bytes:
            return f"{disk.f_bavail * disk.f_frsize // 2**20} MB free"
        if disk.f_files and disk.f_favail <= max(INODE_RESERVE, disk.f_files // 100):
            return f"{disk.f_favail} inodes free"
        return ""

    def reached(self) -> bool:
        return bool(self.short())


@dataclass
class Outcome:
    exit_code: int | None = None
    """None when the command was killed (a limit, a stop)."""
    output: bytes = b""
    """The first KEEP_BYTES of stdout and stderr, interleaved."""
    output_bytes: int = 0
    limit: LimitName | None = None
    stopped: bool = False
    seconds: float = 0.0


async def run_sandboxed(
    mounts: Mounts,
    bwrap: str,
    command: str,
    *,
    limits: CommandLimits,
    file_bytes: int,
    stopped: Callable[[], bool],
    floor: DiskFloor | None = None,
    allowed: tuple[Allowed, ...] = (),
) -> Outcome:
    """Run `command`; never raises for the command's own failures. Raises
    `SandboxUnavailableError` when bwrap could not start the sandbox. With network, the
    command waits in its namespace until `allowed` and the rest of the firewall are set
    and slirp4netns is attached. Where the machine allows, the command runs in cgroups of
    its own that hold it to its memory and process limits (`cgroups.py`)."""
    if shutil.which(bwrap) is None:
        raise SandboxUnavailableError(
            f"Commands cannot run: the sandbox program {bwrap!r} could not be started (it "
            "is not an executable file), and commands never run outside the sandbox."
        )
    cgroups = await asyncio.to_thread(Cgroups.make, limits)
    try:
        run = _Run(mounts, bwrap, limits, stopped, floor, allowed, cgroups)
        return await run.run(command, file_bytes)
    finally:
        if cgroups is not None:
            await asyncio.to_thread(_clear, cgroups)


def _clear(cgroups: Cgroups) -> None:
    cgroups.kill()
    cgroups.remove()


@dataclass(frozen=True)
class _Run:
    mounts: Mounts
    bwrap: str
    limits: CommandLimits
    stopped: Callable[[], bool]
    floor: DiskFloor | None
    allowed: tuple[Allowed, ...]
    cgroups: Cgroups | None

    async def run(self, command: str, file_bytes: int) -> Outcome:
        return await _run(self, command, file_bytes)


async def _run(run: _Run, command: str, file_bytes: int) -> Outcome:
    """bwrap started (inside `run.cgroups`), attached to its network, then watched."""
    mounts, bwrap, limits, cgroups = run.mounts, run.bwrap, run.limits, run.cgroups
    pipes = Pipes.open(mounts.network)
    argv = bwrap_argv(bwrap, mounts, command, pipes, prlimit_argv(limits, file_bytes))
    try:
        process = await asyncio.create_subprocess_exec(
            *(cgroups.wrap(argv) if cgroups else argv),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env={"PATH": PATH},
            pass_fds=pipes.for_bwrap(),
        )
    except OSError as error:
        os.close(pipes.status[0])
        pipes.close_own()
        raise SandboxUnavailableError(
            f"Commands cannot run: the sandbox program {bwrap!r} could not be started "
            f"({error.strerror}), and commands never run outside the sandbox."
        ) from error
    finally:
        pipes.close_bwraps()
    status = b""
    attached: Attached | None = None
    supervisor = _Supervisor(process, limits, run.stopped, run.floor, cgroups)
    try:
        if mounts.network:
            status = await asyncio.to_thread(_first_line, pipes.status[0])
            attached = await _attach(status, run.allowed, supervisor)
        pipes.release()
        outcome = await supervisor.run()
    finally:
        pipes.close_own()
        if attached is not None:
            await attached.close()
        status += await asyncio.to_thread(_read_all, pipes.status[0])
    kernel = await asyncio.to_thread(cgroups.passed) if cgroups else None
    return _checked(outcome, status, kernel)


async def _attach(
    status: bytes, allowed: tuple[Allowed, ...], supervisor: _Supervisor
) -> Attached | None:
    """The network for the sandbox whose status line is `status`; None when bwrap ended
    before it reported a pid (its status then says why). A network that cannot be set up
    ends the sandbox before the command ran."""
    try:
        pid = int(json.loads(status)["child-pid"])
    except (ValueError, KeyError):
        return None
    try:
        return await attach(pid, allowed)
    except (NetworkUnavailableError, OSError, TimeoutError) as error:
        await supervisor.abandon()
        if isinstance(error, NetworkUnavailableError):
            raise SandboxUnavailableError(str(error)) from error
        raise SandboxUnavailableError(
            "Commands with network cannot run: the sandbox's network could not be set up "
            "in time, and commands never get the network without it."
        ) from error


def _first_line(fd: int) -> bytes:
    """bwrap's first status report (the sandbox's pid), or b"" once bwrap has ended."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


def _checked(outcome: Outcome, status: bytes, kernel: LimitName | None = None) -> Outcome:
    """Fail closed when bwrap never started the command; take the command's own exit
    code from bwrap's status (bwrap's own would hide a setup failure); `kernel` is the
    limit the command's cgroups enforced, if any."""
    reports = [json.loads(line) for line in status.decode().splitlines() if line.strip()]
    started = any("child-pid" in report for report in reports)
    if not started and not outcome.stopped:
        said = outcome.output.decode(errors="replace").strip()
        raise SandboxUnavailableError(
            f"Commands cannot run: the sandbox did not start ({said or 'no reason given'}), "
            "and commands never run outside the sandbox."
        )
    if outcome.limit is None and kernel is not None and not outcome.stopped:
        outcome.limit, outcome.exit_code = kernel, None
    for report in reports:
        if "exit-code" in report and outcome.limit is None and not outcome.stopped:
            outcome.exit_code = int(report["exit-code"])
    if outcome.limit is None and (
        outcome.exit_code == FILE_TOO_BIG or OVER_QUOTA in outcome.output
    ):
        outcome.limit = "quota"
    if outcome.limit is None and _said(outcome.output, OUT_OF_MEMORY):
        outcome.limit = "memory"
    if outcome.limit is None and _said(outcome.output, CANNOT_FORK):
        outcome.limit = "processes"
    return outcome


def _said(output: bytes, markers: tuple[bytes, ...]) -> bool:
    """A process that hit a per-process cap (address space, process count) fails that
    allocation or fork, and its shell or runtime says so."""
    return any(marker in output[-4000:] for marker in markers)


class _Supervisor:
    def __init__(
        self,
        process: asyncio.subprocess.Process,
        limits: CommandLimits,
        stopped: Callable[[], bool],
        floor: DiskFloor | None = None,
        cgroups: Cgroups | None = None,
    ) -> None:
        self._process = process
        self._limits = limits
        self._stopped = stopped
        self._floor = floor
        self._cgroups = cgroups
        self._outcome = Outcome()

    async def run(self) -> Outcome:
        started = time.monotonic()
        reader = asyncio.create_task(self._read())
        guard = asyncio.create_task(self._guard_floor())
        try:
            await self._watch(started + self._limits.wall_seconds, reader)
        finally:
            guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await guard
            self._kill()
            with contextlib.suppress(asyncio.CancelledError):
                reader.cancel()
                await reader
            await self._drain()
            await self._process.wait()
        self._outcome.seconds = time.monotonic() - started
        if self._outcome.limit is None and not self._outcome.stopped:
            self._outcome.exit_code = self._process.returncode
        return self._outcome

    async def _drain(self) -> None:
        """Read to the end: the pipe only closes (and `wait` only returns) once what the
        killed tree wrote is consumed."""
        stream = self._process.stdout
        assert stream is not None
        while await stream.read(65536):
            pass

    async def _read(self) -> None:
        stream = self._process.stdout
        assert stream is not None
        while chunk := await stream.read(65536):
            kept = self._outcome.output
            if len(kept) < KEEP_BYTES:
                self._outcome.output = kept + chunk[: KEEP_BYTES - len(kept)]
            self._outcome.output_bytes += len(chunk)
            if self._outcome.output_bytes > self._limits.output_bytes:
                self._outcome.limit = "output"
                return

    async def _guard_floor(self) -> None:
        """The disk's free space, read far more often than the tree is sampled (a statvfs
        is a microsecond): a command writing fast passes the reserve by what it writes in
        FLOOR_SECONDS, not in a whole sample."""
        if self._floor is None:
            return
        while not self._floor.reached():  # noqa: ASYNC110 - free space has no event to wait on
            await asyncio.sleep(FLOOR_SECONDS)
        self._outcome.limit = self._outcome.limit or "disk reserve"
        self._kill()

    async def _watch(self, deadline: float, reader: asyncio.Task[None]) -> None:
        while not await self._settled(reader):
            if self._stopped():
                self._outcome.stopped = True
                return
            if time.monotonic() > deadline:
                self._outcome.limit = "wall time"
                return
            passed = await asyncio.to_thread(self._sample)
            if passed is not None:
                self._outcome.limit = self._outcome.limit or passed
                return

    async def _settled(self, reader: asyncio.Task[None]) -> bool:
        """Wait up to one sample period; True once the command is over, or its output is
        past the limit."""
        await asyncio.wait([reader], timeout=SAMPLE_SECONDS)
        if not reader.done():
            return False
        if self._outcome.limit is not None:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._process.wait(), SAMPLE_SECONDS)
        return self._process.returncode is not None

    def _sample(self) -> LimitName | None:
        """Sum the tree's processes, memory and CPU, and look at the disk's free space; the
        limit passed, if any."""
        beside = self._beside()
        if beside is not None:
            return beside
        try:
            children = psutil.Process(self._process.pid).children(recursive=True)
        except psutil.Error:
            return None
        count, rss, cpu = 0, 0, 0.0
        for child in children:
            with contextlib.suppress(psutil.Error):
                with child.oneshot():
                    count += child.num_threads()
                    rss += child.memory_info().rss
                    times = child.cpu_times()
                cpu += times.user + times.system + times.children_user + times.children_system
        if count >= self._limits.processes:  # at the cap: forks are failing
            return "processes"
        if rss > self._limits.memory_mb * 2**20:
            return "memory"
        if cpu > self._limits.cpu_seconds:
            return "cpu time"
        return None

    async def abandon(self) -> None:
        """Kill a sandbox whose command never started, and wait for it."""
        self._kill()
        await self._drain()
        await self._process.wait()

    def _beside(self) -> LimitName | None:
        """A limit the command's cgroups enforced (a fork refused, a process killed), which
        ends the whole tree at once."""
        return self._cgroups.passed() if self._cgroups is not None else None

    def _kill(self) -> None:
        """The whole tree: the processes alive in it now, and bwrap's session (the PID
        namespace also dies with its first process, but a kill must not depend on it).
        Only live members are killed, so a pid reused since a sample is never hit. Once
        bwrap has exited its PID namespace is gone, and nothing is left to find."""
        if self._process.returncode is not None:
            return
        try:
            members = psutil.Process(self._process.pid).children(recursive=True)
        except psutil.Error:
            members = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        for member in members:
            with contextlib.suppress(psutil.Error):
                member.kill()
        if self._cgroups is not None:
            self._cgroups.kill()
