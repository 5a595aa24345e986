"""One command in a bubblewrap sandbox, with limits, killed with its whole tree.

The sandbox sees the system read-only (/usr, /etc and the /bin, /lib links), a fresh
/tmp, /proc and /dev, its workspace at /workspace (the only writable place) and, when
lent, the parent's workspace read-only at /parent. Nothing else of the host is mounted.
It runs in fresh PID, IPC, UTS, cgroup and (unless allowed) network namespaces.

Run as root, bwrap needs no user namespace: the command drops to the workspace's own
uid with `setpriv` and no capabilities, so the per-user process limit counts only that
workspace's processes. Run as another user, bwrap maps that user into a user namespace.

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
from services.workspace.network import (
    RESOLV_CONF,
    Attached,
    NetworkUnavailableError,
    attach,
)
from services.workspace.seccomp import SeccompUnavailableError
from services.workspace.seccomp import program as seccomp_program

SAMPLE_SECONDS = 0.05
KEEP_BYTES = 64_000
"""Output kept for the result; the rest is counted, not kept."""
SYSTEM = ("/usr", "/etc")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
OUT_OF_MEMORY = (b"MemoryError", b"Cannot allocate memory", b"out of memory", b"bad_alloc")
FILE_TOO_BIG = 128 + signal.SIGXFSZ
"""The shell's exit status for a command killed writing past its file size cap."""
CANNOT_FORK = (b"Cannot fork", b"fork: Resource temporarily unavailable", b"fork: retry")
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


class SandboxUnavailableError(Exception):
    """The sandbox cannot start; the message is the sentence the model is told."""


def find_bwrap(setting: str) -> str:
    found = shutil.which(setting)
    if found is None:
        raise SandboxUnavailableError(
            f"Commands cannot run: the sandbox program bwrap was not found at {setting!r}, "
            "and commands never run outside the sandbox. Install bubblewrap (Debian: "
            "apt-get install bubblewrap) or set TEASPILL_BWRAP to its path."
        )
    return found


@dataclass(frozen=True)
class Mounts:
    workspace: Path
    uid: int
    """The workspace's owner: the command runs as this uid when the service is root."""
    parent: Path | None = None
    network: bool = False
    tmp_bytes: int = 64 * 2**20
    """The size of /tmp, and of /dev/shm: each a tmpfs of its own."""


@dataclass(frozen=True)
class DiskFloor:
    """The disk that holds the workspaces, and the free bytes it keeps: a command that
    brings it below is killed."""

    path: Path
    reserve_bytes: int

    def free(self) -> int:
        return shutil.disk_usage(self.path).free

    def reached(self) -> bool:
        return self.free() <= self.reserve_bytes


@dataclass
class Pipes:
    """The pipes bwrap is given: its status (the command's pid and exit code), the seccomp
    filter and, with network, the resolver's file and the pipe it waits on before it runs
    the command (until the namespace is firewalled and attached)."""

    status: tuple[int, int]
    seccomp: int
    network: tuple[int, int, int] | None = None
    """(resolv.conf to read, wait to read, wait to write)"""

    @classmethod
    def open(cls, network: bool) -> Pipes:
        opened: list[int] = []
        try:
            status = os.pipe()
            opened += status
            seccomp = _filled(seccomp_program())
            opened.append(seccomp)
            if not network:
                return cls(status, seccomp)
            resolv = _filled(RESOLV_CONF.encode())
            opened.append(resolv)
            wait = os.pipe()
        except (OSError, SeccompUnavailableError) as error:
            for fd in opened:
                os.close(fd)
            raise SandboxUnavailableError(str(error)) from error
        return cls(status, seccomp, (resolv, *wait))

    def for_bwrap(self) -> tuple[int, ...]:
        network = self.network[:2] if self.network else ()
        return (self.status[1], self.seccomp, *network)

    def close_bwraps(self) -> None:
        for fd in self.for_bwrap():
            os.close(fd)

    def release(self) -> None:
        """Let the command start."""
        if self.network:
            with contextlib.suppress(OSError):
                os.write(self.network[2], b"1")
            self.close_own()

    def close_own(self) -> None:
        if self.network:
            with contextlib.suppress(OSError):
                os.close(self.network[2])


def _filled(data: bytes) -> int:
    """A pipe holding `data` (well under a pipe's buffer), its writing end closed."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def bwrap_argv(
    bwrap: str, mounts: Mounts, command: str, pipes: Pipes, limits: list[str]
) -> list[str]:
    """`limits`: the `prlimit` command line the command runs under."""
    argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--unshare-net", "--die-with-parent", "--new-session"]
    argv += ["--json-status-fd", str(pipes.status[1]), "--seccomp", str(pipes.seccomp)]
    for path in SYSTEM:
        argv += ["--ro-bind", path, path]
    if pipes.network:
        argv += ["--perms", "0644", "--ro-bind-data", str(pipes.network[0]), "/etc/resolv.conf"]
        argv += ["--block-fd", str(pipes.network[1])]
    for link in SYSTEM_LINKS:
        if Path(link).is_symlink():
            argv += ["--symlink", str(Path(link).readlink()), link]
        elif Path(link).is_dir():
            argv += ["--ro-bind", link, link]
    size = str(mounts.tmp_bytes)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for tmp in ("/dev/shm", "/tmp"):  # noqa: S108 - the sandbox's own, size-bounded
        argv += ["--perms", "1777", "--size", size, "--tmpfs", tmp]
    argv += ["--bind", str(mounts.workspace), "/workspace"]
    if mounts.parent is not None:
        argv += ["--ro-bind", str(mounts.parent), "/parent"]
    argv += ["--chdir", "/workspace", "--clearenv", "--setenv", "PATH", PATH]
    argv += ["--setenv", "HOME", "/workspace", "--setenv", "LANG", "C.UTF-8"]
    if os.geteuid() == 0:
        # No user namespace to disable: the filter refuses making any namespace.
        argv += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--", *limits, "setpriv"]
        argv += [f"--reuid={mounts.uid}", f"--regid={mounts.uid}", "--clear-groups"]
        argv += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    else:
        argv += ["--unshare-user", "--disable-userns", "--uid", "1000", "--gid", "1000"]
        argv += ["--", *limits]
    return [*argv, "/bin/sh", "-c", command]


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


def prlimit_argv(limits: CommandLimits, file_bytes: int) -> list[str]:
    """Per-process backstops behind the watchdog, set inside the sandbox by `prlimit`
    (util-linux), which costs an exec where a `preexec_fn` would cost a full fork."""
    cpu = int(limits.cpu_seconds) + 1
    memory = (limits.memory_mb * 2 + 256) * 2**20
    argv = ["prlimit", f"--cpu={cpu}:{cpu + 1}", f"--as={memory}", f"--fsize={file_bytes}"]
    if os.geteuid() == 0:
        # Counted per uid: the command's own, unique to its workspace.
        argv.append(f"--nproc={limits.processes}")
    return [*argv, "--"]


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
    and slirp4netns is attached."""
    pipes = Pipes.open(mounts.network)
    try:
        process = await asyncio.create_subprocess_exec(
            *bwrap_argv(bwrap, mounts, command, pipes, prlimit_argv(limits, file_bytes)),
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
    supervisor = _Supervisor(process, limits, stopped, floor)
    try:
        if mounts.network:
            status = await asyncio.to_thread(_first_line, pipes.status[0])
            attached = await _attach(status, allowed, supervisor)
        pipes.release()
        outcome = await supervisor.run()
    finally:
        pipes.close_own()
        if attached is not None:
            await attached.close()
        status += await asyncio.to_thread(_read_all, pipes.status[0])
    return _checked(outcome, status)


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


def _checked(outcome: Outcome, status: bytes) -> Outcome:
    """Fail closed when bwrap never started the command; take the command's own exit
    code from bwrap's status (bwrap's own would hide a setup failure)."""
    reports = [json.loads(line) for line in status.decode().splitlines() if line.strip()]
    started = any("child-pid" in report for report in reports)
    if not started and not outcome.stopped:
        said = outcome.output.decode(errors="replace").strip()
        raise SandboxUnavailableError(
            f"Commands cannot run: the sandbox did not start ({said or 'no reason given'}), "
            "and commands never run outside the sandbox."
        )
    for report in reports:
        if "exit-code" in report and outcome.limit is None and not outcome.stopped:
            outcome.exit_code = int(report["exit-code"])
    if outcome.limit is None and outcome.exit_code == FILE_TOO_BIG:
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
    ) -> None:
        self._process = process
        self._limits = limits
        self._stopped = stopped
        self._floor = floor
        self._outcome = Outcome()

    async def run(self) -> Outcome:
        started = time.monotonic()
        reader = asyncio.create_task(self._read())
        try:
            await self._watch(started + self._limits.wall_seconds, reader)
        finally:
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
        if self._floor is not None and self._floor.reached():
            return "disk reserve"
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
