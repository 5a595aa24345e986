"""A workspace's copy for a fork, and the erasure of workspaces and artifacts.

The copy takes the files as they are when the fork is made (a workspace keeps no history
to go back to), links as links (never read through, even one swapped in mid-copy), each
owned by the new agent's uid; a copy started again
after a crash copies everything again over what it had copied. Erasing removes the
folder (a subvolume's contents, then the subvolume itself, which the kernel lets root
remove once it is empty) and the artifacts named, which only the erased agents wrote.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from schemas.workspace import artifact_name
from services.workspace.files import LENT_MODE, existing_workspace, open_workspace
from services.workspace.volumes import Volumes

CHANGED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ELOOP})
"""What reading an entry of a source that changes under the copy meets: it is gone, or no
longer what it was (a link where a file was, a file where a link was)."""


def copy_workspace(
    home: Path, source: str, target: str, quota_bytes: int, volumes: Volumes | None
) -> int:
    """Copy `source`'s workspace into `target`'s (made if need be); the files copied.

    The source may be changing while it is copied (a command of its agent runs), and this
    runs as the service user, which may read every workspace: so every entry is reached
    from its folder's open descriptor and opened without following a link (`os.fwalk`
    does the same for folders), and a folder or file swapped for a link mid-copy is copied
    as that link, never read through it."""
    found = existing_workspace(home, source)
    if found is None:
        return 0
    workspace = open_workspace(home, target, quota_bytes, volumes)
    copied = 0
    for folder, dirs, names, folder_fd in os.fwalk(found):
        into = workspace.root / os.path.relpath(folder, found)
        for name in dirs:  # a folder, or a link to one
            if _copy_entry(folder_fd, name, into / name):
                workspace.own(into / name)
                copied += (into / name).is_symlink()
        for name in names:
            if _copy_entry(folder_fd, name, into / name):
                workspace.own(into / name)
                copied += 1
    return copied


def _copy_entry(folder_fd: int, name: str, target: Path) -> bool:
    """Copy the entry `name` of the open folder to `target`: a folder is made (its
    contents come as `os.fwalk` reaches them), a link stays a link, a regular file is
    copied; anything else, or an entry gone or changed meanwhile, is left out (False)."""
    try:
        found = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if stat.S_ISDIR(found.st_mode):
            target.mkdir(mode=LENT_MODE, exist_ok=True)
            return True
        if target.is_symlink() or target.is_file():
            target.unlink()
        if stat.S_ISREG(found.st_mode) and _copy_file(folder_fd, name, target):
            return True
        target.symlink_to(os.readlink(name, dir_fd=folder_fd))
    except OSError as error:
        if error.errno in CHANGED:
            return False
        raise  # the copy's own write failed (its quota, the disk): the step says so
    return True


def _copy_file(folder_fd: int, name: str, target: Path) -> bool:
    """Copy a regular file, opened without following a link; False when `name` turned
    out to be a link (it was swapped since it was looked at)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        source_fd = os.open(name, flags, dir_fd=folder_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return False
        raise
    with os.fdopen(source_fd, "rb") as source:
        found = os.fstat(source.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        written = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(written, "wb") as copy:
            shutil.copyfileobj(source, copy)
    target.chmod(stat.S_IMODE(found.st_mode), follow_symlinks=False)
    os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns), follow_symlinks=False)
    return True


def erase_workspaces(home: Path, addresses: Iterable[str]) -> int:
    """Remove each agent's workspace; how many there were."""
    erased = 0
    for address in addresses:
        root = existing_workspace(home, address)
        if root is None:
            continue
        for entry in list(root.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        root.rmdir()
        erased += 1
    return erased


def erase_artifacts(store: Path, digests: Iterable[str]) -> int:
    """Remove the artifacts with these sha256 digests; how many the store held."""
    erased = 0
    for digest in digests:
        name = artifact_name(digest)
        path = store / name if name is not None else None
        if path is not None and path.is_file():
            path.unlink()
            erased += 1
    return erased
