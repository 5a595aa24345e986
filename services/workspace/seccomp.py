"""The seccomp filter every sandboxed command runs under, as a classic BPF program that
bwrap loads (`--seccomp FD`) just before it runs the command.

The program is a short list of checks written out here rather than built with libseccomp:
its Python binding is not on PyPI in a maintained form (Debian's is tied to the system's
interpreter), and a flat list of syscall numbers is easy to read and to test.

What it refuses, with EPERM: the syscalls that reach the kernel's most exposed parts or
the host's state (keyrings, eBPF, perf events, ptrace and other processes' memory,
io_uring, mounting, namespaces, modules, kexec, reboot, swap, clocks, quotas, file
handles), `clone` with any new-namespace flag, `fallocate` with any mode but the plain
one (FALLOC_FL_KEEP_SIZE and the range modes allocate or grow past the file size rlimit
that caps a command's files, so one call could fill the disk), and every x32 syscall;
`clone3`, whose flags a classic filter cannot read, answers ENOSYS so that the C library
falls back to `clone`. Every btrfs ioctl (type 0x94) answers ENOTTY, as on a filesystem
without them: on the workspaces' btrfs a command could otherwise make a subvolume or a
snapshot (whose quota group has no limit of the workspace's) or change quotas; `cp` and
the like fall back from a refused reflink (FICLONE is one of them) to copying.
A syscall of another architecture (a 32-bit `int 0x80`) kills the process.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
LD_ABS = 0x20
JEQ = 0x15
JGE = 0x35
JSET = 0x45
AND = 0x54
RET = 0x06
NR, ARCH, ARG0 = 0, 4, 16
"""Offsets in `struct seccomp_data` (the low half of the first argument, little-endian)."""

CLONE = 56
CLONE3 = 435
FALLOCATE = 285
ARG1 = 24
"""The low half of the second argument: `fallocate`'s mode."""
IOCTL = 16
IOCTL_TYPE = 0xFF00
BTRFS_IOCTLS = 0x9400
"""An ioctl request's type byte (`_IOC_TYPE`), and btrfs's: 0x94."""
NEW_NAMESPACES = 0x7E020080
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET and NEWTIME."""

REFUSED = {
    "ptrace": 101, "syslog": 103, "uselib": 134,
    "vhangup": 153, "pivot_root": 155, "_sysctl": 156, "adjtimex": 159, "chroot": 161,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173, "create_module": 174,
    "init_module": 175, "delete_module": 176, "get_kernel_syms": 177, "query_module": 178,
    "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212, "clock_settime": 227,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438,
    "mount_setattr": 442, "quotactl_fd": 443,
}  # fmt: skip
"""x86_64 numbers of the syscalls refused."""

Jump = int | str
"""An offset, or the label of an instruction further on."""
Line = tuple[int, Jump, Jump, int]
"""One instruction: the opcode, where to jump when true and when false, the constant."""


class SeccompUnavailableError(Exception):
    """No filter for this machine; the message is a sentence."""


def program() -> bytes:
    """The filter, as the `struct sock_filter` array bwrap reads."""
    if platform.machine() not in ("x86_64", "amd64"):
        raise SeccompUnavailableError(
            f"Commands cannot run: the sandbox's system call filter is written for x86_64, "
            f"and this machine is {platform.machine()}; commands never run without it."
        )
    code: list[Line] = [
        (LD_ABS, 0, 0, ARCH),
        (JEQ, 1, 0, AUDIT_ARCH_X86_64),
        (RET, 0, 0, RET_KILL_PROCESS),
        (LD_ABS, 0, 0, NR),
        (JGE, "refuse", 0, X32_BIT),
        (JEQ, "clone3", 0, CLONE3),
        (JEQ, "clone", 0, CLONE),
        (JEQ, "fallocate", 0, FALLOCATE),
        (JEQ, "ioctl", 0, IOCTL),
    ]
    code += [(JEQ, "refuse", 0, number) for number in sorted(REFUSED.values())]
    code += [(RET, 0, 0, RET_ALLOW)]
    labels: dict[str, int] = {}
    for label, lines in _CHECKS:
        labels[label] = len(code)
        code += lines
    return b"".join(_encode(index, line, labels) for index, line in enumerate(code))


_CHECKS: tuple[tuple[str, list[Line]], ...] = (
    ("clone", [(LD_ABS, 0, 0, ARG0), (JSET, "refuse", 0, NEW_NAMESPACES), (RET, 0, 0, RET_ALLOW)]),
    ("fallocate", [(LD_ABS, 0, 0, ARG1), (JEQ, 0, "refuse", 0), (RET, 0, 0, RET_ALLOW)]),
    (
        "ioctl",
        [
            (LD_ABS, 0, 0, ARG1),
            (AND, 0, 0, IOCTL_TYPE),
            (JEQ, "no ioctl", 0, BTRFS_IOCTLS),
            (RET, 0, 0, RET_ALLOW),
        ],
    ),
    ("clone3", [(RET, 0, 0, RET_ERRNO | errno.ENOSYS)]),
    ("no ioctl", [(RET, 0, 0, RET_ERRNO | errno.ENOTTY)]),
    ("refuse", [(RET, 0, 0, RET_ERRNO | errno.EPERM)]),
)
"""The checks on a syscall's arguments, each under its label, after the list of numbers."""


def _encode(index: int, line: Line, labels: dict[str, int]) -> bytes:
    op, true, false, k = line

    def offset(jump: Jump) -> int:
        return labels[jump] - index - 1 if isinstance(jump, str) else jump

    return struct.pack("<HBBI", op, offset(true), offset(false), k)
