"""A child process of the stack: own process group, log file, health wait, stop and kill."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import httpx

from services.settings import Settings

LOG_TAIL_LINES = 15
UMASK = 0o077
"""Every file a part of the stack makes (Restate's data, the projection, workspaces, logs)
is its user's alone."""
LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


class StackError(RuntimeError):
    """A part of the stack could not start, register or stop; the message says what and why."""


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
FREE_PORTS = 10_000
"""How many ports outside the kernel's ephemeral range `free_port` picks from."""
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (for tests), not handed
    out before by this process.

    It is picked outside the kernel's ephemeral range where there is room: a port from
    that range (what binding to port 0 gives) can be taken by any outgoing connection
    between this check and the moment the child binds it, and restate-server then fails
    with "Address in use"."""
    low, high = _outside_ephemeral()
    if low > high:  # the range covers every unprivileged port: the kernel's choice
        return _kernels_port()
    for _ in range(200):
        port = low + secrets.randbelow(high - low + 1)
        if port not in _handed_out and not _bound(port):
            _handed_out.add(port)
            return port
    raise StackError(f"No free TCP port on 127.0.0.1 between {low} and {high}.")


def _outside_ephemeral() -> tuple[int, int]:
    """Up to `FREE_PORTS` unprivileged ports just below the ephemeral range, or above it
    when there is more room there (Linux's default range where it cannot be read)."""
    try:
        first, last = (int(n) for n in EPHEMERAL_RANGE.read_text().split()[:2])
    except (OSError, ValueError):
        first, last = 32768, 60999
    below = (max(1024, first - FREE_PORTS), first - 1)
    above = (last + 1, min(65535, last + FREE_PORTS))
    return max(below, above, key=lambda span: span[1] - span[0])


def _kernels_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int, grace: float = 3.0) -> bool:
    """Whether something still listens on 127.0.0.1:port after `grace` seconds.

    SO_REUSEADDR matches what restate-server and hypercorn do, so a socket in TIME_WAIT
    from a previous run does not count as in use. The grace covers a process killed a
    moment ago whose sockets the kernel is still closing.
    """
    deadline = time.monotonic() + grace
    while _bound(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _bound(port)


def _bound(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ManagedProcess:
    """One child process, started in its own session so that `kill` reaches all of it
    (for example hypercorn's worker) and nothing else."""

    def __init__(
        self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def spawn(self) -> None:
        if self.running:
            raise StackError(f"{self.name} is already running (pid {self.pid}).")
        self.log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._log = os.fdopen(os.open(self.log_path, LOG_FLAGS, 0o600), "ab")
        self._log.write(f"--- teaspill starts: {' '.join(self.argv)}\n".encode())
        self._log.flush()
        self._proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=UMASK,
        )

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `ready` until true; a sentence if the process exits or time runs out first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                self._close_log()
                raise self._error(
                    f"{self.name} exited with code {self._returncode()} before it could {what}"
                )
            if ready():
                return
            time.sleep(0.1)
        raise self._error(f"{self.name} did not {what} within {timeout:g} s")

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGTERM) -> None:
        """`sig` (SIGTERM), then wait; a process that ignores it is killed and reported."""
        if self._proc is None or self._proc.poll() is not None:
            self._close_log()
            return
        self._proc.send_signal(sig)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise StackError(
                f"{self.name} did not stop within {timeout:g} s of"
                f" {signal.Signals(sig).name} and was killed;"
                f" see {self.log_path}."
            ) from None
        _wait_group_gone(self._proc.pid)
        self._close_log()

    def kill(self) -> None:
        """SIGKILL the whole process group, then reap the leader."""
        if self._proc is None:
            return
        # returncode is None until the leader is reaped, so its pid (the group id) cannot
        # have been reused by an unrelated process yet.
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        _wait_group_gone(self._proc.pid)
        self._close_log()

    def _returncode(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    def _error(self, what: str) -> StackError:
        tail = log_tail(self.log_path)
        more = f"; its last log lines:\n{tail}" if tail else ""
        return StackError(f"{what}; see {self.log_path}{more}")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _wait_group_gone(pgid: int, timeout: float = 5.0) -> None:
    """Wait until no process of the group is left alive, so that its ports are free again.

    The leader is reaped first; its children (hypercorn's worker) may still be exiting.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group is still alive, zombies aside: orphans are reaped by
    PID 1, which can take seconds, and a zombie holds no port."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            # After "pid (comm)": state, ppid, pgrp, ...
            state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            return True
    return False


def private_home(home: Path) -> None:
    """Make the home (or take it as it is) readable by its owner alone: 0700."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if home.stat().st_mode & 0o077:
        try:
            home.chmod(0o700)
        except PermissionError as error:
            raise StackError(
                f"The home {home} is readable by others and cannot be made private (it "
                "belongs to another user): choose a home of this user's (TEASPILL_HOME)."
            ) from error


def answers(url: str, *codes: int) -> bool:
    """Whether `GET url` answers with one of `codes` (200 if none are given)."""
    try:
        response = httpx.get(url, timeout=2.0)
    except httpx.TransportError:
        return False
    return response.status_code in (codes or (httpx.codes.OK,))


class Part(ABC):
    """One part of the stack in a child process: started and waited for until it is
    ready, stopped with SIGTERM, or killed as a crash would."""

    name: str
    """How sentences name it: "restate-server", "the endpoint", "the gateway"."""
    stop_timeout = 30.0

    def __init__(self, settings: Settings, log_name: str) -> None:
        self.settings = settings
        self.log_path = settings.home / "logs" / f"{log_name}.log"
        self._process: ManagedProcess | None = None

    @abstractmethod
    def argv(self) -> list[str]: ...

    @abstractmethod
    def env(self) -> dict[str, str]: ...

    @abstractmethod
    def ports(self) -> dict[str, tuple[int, str]]:
        """What each port is for, with the port and the setting that moves it."""

    @abstractmethod
    def ready(self) -> bool: ...

    @property
    def pid(self) -> int | None:
        """The process group of the running part (its leader's pid)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def start(self, timeout: float = 60.0) -> None:
        """Start the process and return once it is ready; a sentence if it is not."""
        self.spawn()
        self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the process without waiting for it: parts that need each other to get
        ready (the nodes of a cluster) are spawned together, then waited for."""
        private_home(self.settings.home)
        for role, (port, setting) in self.ports().items():
            if port_in_use(port):
                raise StackError(
                    f"Port {port} ({role}) on 127.0.0.1 is already in use: stop what listens"
                    f" there or set {setting} to another port."
                )
        title = self.name[0].upper() + self.name[1:]
        self._process = ManagedProcess(title, self.argv(), self.env(), self.log_path)
        self._process.spawn()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Return once the spawned process is ready; killed, and a sentence, if it is not."""
        if self._process is None:
            raise StackError(f"{self.name} was not started.")
        try:
            self._process.wait_until(self.ready, timeout, "get ready")
        except StackError:
            self._process.kill()
            raise

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM and wait for a clean exit."""
        if self._process is not None:
            self._process.stop(timeout or self.stop_timeout)

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would."""
        if self._process is not None:
            self._process.kill()
