"""Copying a folder's tree without ever following a link, on either side.

The source may be a workspace a command is changing while it is copied, and the copier
(the service user, root where workspaces have uids of their own) may read and write every
workspace. So nothing is reached by a path: every entry is looked at, opened or made
relative to its folder's open descriptor, folders are opened with `O_DIRECTORY |
O_NOFOLLOW` and files with `O_NOFOLLOW`. A link is copied as a link (its text), never read
through; an entry swapped for a link, or gone, between the look and the open is left out.
Whatever is not a regular file, a folder or a link (a FIFO, a socket, a device) is left out
and named in `TreeCopy.skipped`, as is a folder nested deeper than `MOST_DEPTH`.

The target is a folder the caller has just made and holds open: nothing else writes in it
while it is filled, so what the copy makes there is what it finds there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MADE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
CHANGED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ELOOP})
"""What reaching an entry of a source that changes under the copy meets: it is gone, or no
longer what it was (a link where a file was, a file where a folder was)."""
MOST_DEPTH = 200
"""Folders deeper than this are left out: each level holds two descriptors open."""
KEPT_BITS = 0o1777
"""A copy's mode bits: never setuid nor setgid."""


@dataclass(frozen=True)
class CopyRules:
    owner: Callable[[os.stat_result], tuple[int, int] | None] = lambda found: None
    """The uid and gid each copy gets, given its source's stat (None: the copier's)."""
    folder_mode: int | None = None
    """Every folder's mode (None: its source's)."""
    linked: Callable[[str], bool] = lambda relative: False
    """Files (by relative path) never rewritten once written: hard-linked, not copied."""
    left_out: frozenset[str] = frozenset()
    """Names not copied wherever they are (a process's lock file)."""


@dataclass
class TreeCopy:
    files: int = 0
    """Regular files and links copied."""
    skipped: list[str] = field(default_factory=list)
    """What was left out for being neither a file, a folder nor a link, or too deep (paths
    relative to the source)."""


@dataclass
class _Level:
    source: int
    target: int
    relative: str
    found: os.stat_result
    names: Iterator[str]


def copy_tree(source: Path, target: int, rules: CopyRules) -> TreeCopy:
    """Copy the tree of the folder `source` (itself no link) into the empty folder open at
    `target`, which gets `source`'s mode (or `rules.folder_mode`), owner and times too."""
    copy = TreeCopy()
    top = os.open(source, FOLDER)
    levels = [_Level(top, os.dup(target), "", os.fstat(top), _names(top))]
    try:
        while levels:
            level = levels[-1]
            name = next(level.names, None)
            if name is None:
                _finish(levels.pop(), rules)
                continue
            if name in rules.left_out:
                continue
            deeper = _entry(level, name, rules, copy, room=len(levels) <= MOST_DEPTH)
            if deeper is not None:
                levels.append(deeper)
    finally:
        for level in levels:
            _close(level)
    return copy


def _names(folder: int) -> Iterator[str]:
    return iter(sorted(os.listdir(folder)))


def _entry(
    level: _Level, name: str, rules: CopyRules, copy: TreeCopy, *, room: bool
) -> _Level | None:
    """Copy one entry; the folder to go into next when it is one (and `room` says the
    copy may go a level deeper)."""
    relative = level.relative + name
    try:
        found = os.stat(name, dir_fd=level.source, follow_symlinks=False)
        if stat.S_ISDIR(found.st_mode) and room:
            return _folder(level, name, relative)
        if stat.S_ISLNK(found.st_mode):
            os.symlink(os.readlink(name, dir_fd=level.source), name, dir_fd=level.target)
            _own_link(level.target, name, rules.owner(found))
            copy.files += 1
        elif stat.S_ISREG(found.st_mode):
            copy.files += _file(level, name, relative, rules)
        else:  # a FIFO, a socket, a device, or a folder too deep
            copy.skipped.append(relative)
    except OSError as error:
        if error.errno not in CHANGED:
            raise  # the copy's own write failed (a quota, the disk): the caller says so
    return None


def _folder(level: _Level, name: str, relative: str) -> _Level:
    source = os.open(name, FOLDER, dir_fd=level.source)
    try:
        os.mkdir(name, 0o700, dir_fd=level.target)
        target = os.open(name, FOLDER, dir_fd=level.target)
    except BaseException:
        os.close(source)
        raise
    return _Level(source, target, relative + "/", os.fstat(source), _names(source))


def _file(level: _Level, name: str, relative: str, rules: CopyRules) -> int:
    """Copy (or hard-link) a regular file; 0 when it turned out to be something else."""
    source = os.open(name, FILE, dir_fd=level.source)
    with os.fdopen(source, "rb") as given:
        found = os.fstat(given.fileno())
        if not stat.S_ISREG(found.st_mode):
            return 0  # swapped for a FIFO or a device since it was looked at
        if rules.linked(relative) and _linked(level, name, found):
            return 1
        made = os.open(name, MADE, 0o600, dir_fd=level.target)
        with os.fdopen(made, "wb") as copy:
            shutil.copyfileobj(given, copy)
            _own(copy.fileno(), rules.owner(found))
            os.fchmod(copy.fileno(), stat.S_IMODE(found.st_mode) & KEPT_BITS)
            os.utime(copy.fileno(), ns=(found.st_atime_ns, found.st_mtime_ns))
    return 1


def _linked(level: _Level, name: str, opened: os.stat_result) -> bool:
    """A hard link to the file opened, if the name still is that file and the filesystem
    lets it be linked."""
    try:
        os.link(name, name, src_dir_fd=level.source, dst_dir_fd=level.target, follow_symlinks=False)
    except OSError:
        return False
    made = os.stat(name, dir_fd=level.target, follow_symlinks=False)
    if (made.st_dev, made.st_ino) == (opened.st_dev, opened.st_ino):
        return True
    os.unlink(name, dir_fd=level.target)  # the name was swapped between the open and the link
    return False


def _finish(level: _Level, rules: CopyRules) -> None:
    """A folder whose entries are all made: its owner, mode and times."""
    found = level.found
    try:
        _own(level.target, rules.owner(found))
        mode = rules.folder_mode if rules.folder_mode is not None else stat.S_IMODE(found.st_mode)
        os.fchmod(level.target, mode & KEPT_BITS)
        os.utime(level.target, ns=(found.st_atime_ns, found.st_mtime_ns))
    finally:
        _close(level)


def _own(descriptor: int, owner: tuple[int, int] | None) -> None:
    if owner is not None and owner != _owner(os.fstat(descriptor)):
        with contextlib.suppress(PermissionError):  # not root: the copier's own
            os.fchown(descriptor, *owner)


def _own_link(folder: int, name: str, owner: tuple[int, int] | None) -> None:
    if owner is not None:
        with contextlib.suppress(PermissionError):
            os.chown(name, *owner, dir_fd=folder, follow_symlinks=False)


def _owner(found: os.stat_result) -> tuple[int, int]:
    return found.st_uid, found.st_gid


def _close(level: _Level) -> None:
    for descriptor in (level.source, level.target):
        with contextlib.suppress(OSError):
            os.close(descriptor)


def count_tree(root: Path) -> int:
    """Regular files and links under `root` (itself no link), none followed: what
    `copy_tree` counts of a tree it copied."""
    counted = 0
    for _folder_path, dirs, names, folder in os.fwalk(root, follow_symlinks=False):
        counted += len(names)
        counted += sum(
            stat.S_ISLNK(os.stat(d, dir_fd=folder, follow_symlinks=False).st_mode) for d in dirs
        )
    return counted
