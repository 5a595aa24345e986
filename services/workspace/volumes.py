"""The workspaces' own filesystem, where the machine allows it: a btrfs image in the home
(`workspaces.img`, a sparse file), loop-mounted at `$TEASPILL_HOME/workspaces` with quotas
on, each workspace a subvolume whose qgroup limit is its spec's quota. The kernel then
refuses (EDQUOT) any write, file, folder or link that would take a workspace past its
quota, however many a command makes, where the folder checks see a command's writes only
once it has ended.

`prepare` is called where the execution plane starts: under a lock in the home it mounts
the image (making it first, if need be), or finds it mounted by another process of the same
home, and takes a shared hold on it for as long as the process lives. `release`, when a
stack stops its endpoint, unmounts it unless a process still holds it. A process killed
leaves the mount in place, and the next start reuses it. Existing plain folders are never
hidden under a mount.

Subvolumes are made and limited with the kernel's btrfs ioctls, one system call each; only
making the filesystem uses btrfs-progs (`mkfs.btrfs`), and mounting util-linux's `mount`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

DiskMode = Literal["auto", "image", "folder"]
IMAGE = "workspaces.img"
SETUP_LOCK = "workspaces.lock"
HOLD_LOCK = "workspaces.held"
MOUNTED_BY = "workspaces.mounted"
"""The name of the machine that has the image mounted, while it does."""
SUBVOLUME_INODE = 256
"""The inode number of every btrfs subvolume's root folder."""
TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# ioctl numbers: (direction << 30) | (size << 16) | (0x94 << 8) | number.
SUBVOL_CREATE = (1 << 30) | (4096 << 16) | (0x94 << 8) | 14
"""BTRFS_IOC_SUBVOL_CREATE, with `struct btrfs_ioctl_vol_args` (an fd and a 4088-byte name)."""
QGROUP_LIMIT = (2 << 30) | (48 << 16) | (0x94 << 8) | 43
"""BTRFS_IOC_QGROUP_LIMIT, with the qgroup id (0: the subvolume of the fd) and its limits."""
QUOTA_CTL = (3 << 30) | (16 << 16) | (0x94 << 8) | 40
"""BTRFS_IOC_QUOTA_CTL; command 1 enables quotas (nothing happens if they are on)."""
LIMIT_REFERENCED = 1
"""BTRFS_QGROUP_LIMIT_MAX_RFER: every byte the subvolume references counts, shared or not."""


class DiskUnavailableError(Exception):
    """The workspaces' filesystem cannot be had; the message is a sentence."""


class MountedElsewhereError(DiskUnavailableError):
    """Another machine has the image mounted: refused in `auto` mode too, as plain folders
    beside it would split the workspaces between the machines."""


@dataclass(frozen=True)
class Volumes:
    """The mounted filesystem; the workspaces under `mount` are its subvolumes. `hold`:
    a shared lock on the mount that keeps `release` from unmounting it while this process
    may use it (the kernel drops it when the process ends)."""

    mount: Path
    hold: int

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.hold)

    def make(self, root: Path) -> None:
        """A subvolume at `root`, whose parent folder exists."""
        name = root.name.encode()
        descriptor = os.open(root.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.ioctl(descriptor, SUBVOL_CREATE, bytearray(struct.pack("<q4088s", 0, name)))
        finally:
            os.close(descriptor)

    def limit(self, root: Path, quota_bytes: int) -> bool:
        """Set the subvolume's limit; the kernel counts what it references from then on.
        False for a folder that is not a subvolume (made by hand), which is left alone: its
        limit would be its parent's."""
        descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if os.fstat(descriptor).st_ino != SUBVOLUME_INODE:
                return False
            limits = struct.pack("<6Q", 0, LIMIT_REFERENCED, quota_bytes, 0, 0, 0)
            fcntl.ioctl(descriptor, QGROUP_LIMIT, limits)
        finally:
            os.close(descriptor)
        return True


def prepare(home: Path, mode: DiskMode, image_mb: int | None = None) -> Volumes | None:
    """The workspaces' filesystem, mounted; None for plain folders. In `image` mode, a
    `DiskUnavailableError` when it cannot be had; in `auto`, one log line saying why
    not, and plain folders. `image_mb`: the size of a new image (default: the size of the
    disk that holds the home)."""
    if mode == "folder":
        return None
    mount = home / "workspaces"
    try:
        hold = _prepared(home, mount, image_mb)
    except DiskUnavailableError as error:
        if mode == "image" or isinstance(error, MountedElsewhereError):
            raise
        log.warning(
            "Workspaces are plain folders, and each workspace's quota is checked after each "
            "command, not by the kernel: %s",
            error,
        )
        return None
    return Volumes(mount, hold)


def _prepared(home: Path, mount: Path, image_mb: int | None) -> int:
    """The image mounted at `mount`; the descriptor of this process's hold on it."""
    if os.geteuid() != 0:
        # Setting a quota group's limit needs CAP_SYS_ADMIN, even on a mount that is there.
        raise DiskUnavailableError("the workspaces' image needs the service to run as root")
    try:
        with _locked(home / SETUP_LOCK):
            _mounted_or_mount(home, mount, image_mb)
            hold = os.open(home / HOLD_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(hold, fcntl.LOCK_SH)
    except OSError as error:
        raise DiskUnavailableError(
            f"the service could not prepare the workspaces' image ({_reason(error)})"
        ) from None
    return hold


def release(home: Path) -> bool:
    """Unmount the workspaces' filesystem of `home`, unless a process still holds it; True
    once it is not mounted."""
    mount = home / "workspaces"
    if not (home / SETUP_LOCK).exists():
        return not os.path.ismount(mount)
    with _locked(home / SETUP_LOCK):
        if not _is_ours(mount):
            return True
        with _opened(home / HOLD_LOCK) as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                _run(["umount", str(mount)], "unmount the image")
            except DiskUnavailableError:
                return False
            (home / MOUNTED_BY).unlink(missing_ok=True)
            return True


def _mounted_or_mount(home: Path, mount: Path, image_mb: int | None) -> None:
    if os.path.ismount(mount):
        if not _is_ours(mount):
            raise DiskUnavailableError(
                f"{mount} is a mount point of another filesystem than the workspaces' own "
                "image, which is left as it is."
            )
        return
    _refuse_unless_possible(mount)
    _refuse_if_mounted_elsewhere(home)
    image = home / IMAGE
    if not image.exists():
        _make_image(image, image_mb or _disk_size(home))
    mount.mkdir(exist_ok=True)
    _run(["mount", "-o", "loop,discard=async", str(image), str(mount)], "mount the image")
    (home / MOUNTED_BY).write_text(os.uname().nodename + "\n")
    descriptor = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(descriptor, QUOTA_CTL, struct.pack("<QQ", 1, 0))
    except OSError as error:
        _run(["umount", str(mount)], "unmount the image")
        raise DiskUnavailableError(
            f"quotas could not be turned on in the workspaces' image ({_reason(error)})"
        ) from None
    finally:
        os.close(descriptor)


def _refuse_if_mounted_elsewhere(home: Path) -> None:
    """The image is not mounted here: refuse if another machine (a home on a shared volume)
    mounted it and has not let it go. This machine's own mark (left by a kill, or by a
    boot before) is taken over."""
    marker = home / MOUNTED_BY
    try:
        name = marker.read_text().strip()
    except FileNotFoundError:
        return
    if name in ("", os.uname().nodename):
        return
    raise MountedElsewhereError(
        f"the workspaces' image in {home} is mounted by the machine {name!r}, and a btrfs "
        "image mounted by two machines at once is corrupted. Give each machine a home of "
        "its own, or set TEASPILL_WORKSPACE_DISK=folder on every machine that shares this "
        f"one (after moving the workspaces out of the image); if {name!r} no longer uses "
        f"it, remove {marker}"
    )


def _refuse_unless_possible(mount: Path) -> None:
    if not Path("/dev/loop-control").exists():
        raise DiskUnavailableError("this machine has no loop devices (/dev/loop-control)")
    if shutil.which("mkfs.btrfs", path=TOOL_PATH) is None:
        raise DiskUnavailableError(
            "mkfs.btrfs is not installed (Debian: apt-get install btrfs-progs)"
        )
    if mount.is_dir() and any(mount.iterdir()):
        raise DiskUnavailableError(
            f"{mount} already holds workspaces as plain folders, which a mount would hide"
        )


def _make_image(image: Path, size_mb: int) -> None:
    """A sparse file with an empty btrfs in it, renamed into place only once it is whole."""
    made = image.with_suffix(".new")
    with made.open("wb") as file:
        file.truncate(size_mb * 2**20)
    made.chmod(0o600)
    _run(["mkfs.btrfs", "-q", "-f", "-K", str(made)], "make the image's filesystem")
    made.rename(image)


def _disk_size(home: Path) -> int:
    disk = os.statvfs(home)
    return disk.f_blocks * disk.f_frsize // 2**20


def mounted_under(root: Path) -> list[Path]:
    """Every workspaces' filesystem mounted below `root`: what a stop left mounted."""
    base, found = str(root.resolve()), []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            target = _unescape(fields[4])
            kind = fields[fields.index("-") + 1]
            if kind == "btrfs" and target.startswith(base + "/") and target.endswith("/workspaces"):
                found.append(Path(target))
    return found


def _is_ours(mount: Path) -> bool:
    """A btrfs mounted at `mount` (the image: nothing else mounts one there)."""
    return os.path.ismount(mount) and _mounted_type(mount) == "btrfs"


def _mounted_type(path: Path) -> str:
    """The type of the filesystem mounted last at `path`, from /proc/self/mountinfo."""
    target, found = str(path.resolve()), ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if _unescape(fields[4]) == target:
                found = fields[fields.index("-") + 1]
    return found


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")


def _run(argv: list[str], what: str) -> None:
    env = {"PATH": TOOL_PATH, "LC_ALL": "C"}
    try:
        done = subprocess.run(argv, capture_output=True, env=env, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        raise DiskUnavailableError(f"the service could not {what}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise DiskUnavailableError(
            f"the service could not {what} ({said[-1] if said else 'no reason given'})"
        )


def _reason(error: OSError) -> str:
    return os.strerror(error.errno).lower() if error.errno else "refused"


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with _opened(path) as descriptor:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
