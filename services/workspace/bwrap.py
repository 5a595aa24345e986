"""The bwrap command line of one sandboxed command, and the pipes it is given.

The sandbox sees the system read-only (/usr, /etc and the /bin, /lib links), /proc, /dev,
a bounded tmpfs at /tmp and at /dev/shm, its workspace at /workspace (the only writable
place) and, when lent, the parent's workspace read-only at /parent. Nothing else of the
host is mounted. It runs in fresh PID, IPC, UTS, cgroup and network namespaces, under the
seccomp filter (`seccomp.py`).

Run as root, bwrap needs no user namespace: the command drops to the workspace's own
uid with `setpriv` and no capabilities, so the per-user process limit counts only that
workspace's processes. Run as another user, bwrap maps that user into a user namespace.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from schemas.sandbox import CommandLimits
from services.workspace.files import WORKSPACE_UMASK
from services.workspace.network import RESOLV_CONF
from services.workspace.seccomp import SeccompUnavailableError
from services.workspace.seccomp import program as seccomp_program

SYSTEM = ("/usr", "/etc")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
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
        """Close the end this process keeps, once: a second close could close another
        sandbox's pipe that was given the same number since (and end its network)."""
        if self.network and self.network[2] >= 0:
            wait = self.network[2]
            self.network = (self.network[0], self.network[1], -1)
            with contextlib.suppress(OSError):
                os.close(wait)


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
    # The endpoint's own umask (077) would keep what the command writes from a child the
    # workspace is lent to (`files.LENT_MODE`).
    return [*argv, "/bin/sh", "-c", f"umask {WORKSPACE_UMASK:03o}; {command}"]


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
