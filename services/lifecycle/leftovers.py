"""What a crash leaves behind: a file being written aside (`archive/TENANT/.put-*`, a
backup's archive beside its target) or a
backup's staging folder (`HOME/.backup-*`), and how the next run of the same operation
removes it without touching one still in use.

The writer holds an exclusive `flock` on what it stages for as long as it works on it; the
kernel drops the lock when its process dies, however it dies. A leftover is removed only
when its lock can be taken at once and it is older than `STALE_AFTER` (so one made a moment
ago, not locked yet, is left too): several processes may share a home (endpoint replicas,
a backup beside them), and each may be staging something of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("teaspill.lifecycle")
STALE_AFTER = 60.0
"""Seconds since a leftover last changed before it may be removed."""


@contextlib.contextmanager
def holding(path: Path) -> Iterator[None]:
    """Hold `path` (a file or a folder) while the body works on it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def sweep(folder: Path, prefix: str, *, folders: bool = False) -> int:
    """Remove the entries of `folder` named `prefix...` (the folders among them, with
    `folders`; else the files) that no process holds and that are older than
    `STALE_AFTER`; how many were removed."""
    try:
        entries = [entry for entry in folder.iterdir() if entry.name.startswith(prefix)]
    except (FileNotFoundError, NotADirectoryError):
        return 0  # nothing to sweep; the write that follows says what is in the way
    removed = 0
    for entry in entries:
        with contextlib.suppress(FileNotFoundError):
            removed += _remove_if_left(entry, folders=folders)
    if removed:
        log.info("removed %d left by a crash in %s", removed, folder)
    return removed


def _remove_if_left(entry: Path, *, folders: bool) -> int:
    if entry.is_symlink() or entry.is_dir() != folders:
        return 0
    if time.time() - entry.lstat().st_mtime < STALE_AFTER:  # noqa: TID251
        return 0
    fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # its writer is alive
        if folders:
            shutil.rmtree(entry)
        else:
            entry.unlink()
        return 1
    finally:
        os.close(fd)
