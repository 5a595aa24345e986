"""Workspace directories: one per agent under `TEASPILL_HOME/workspaces`, created on first
use, owned by the workspace's own uid, with a size quota.

Paths the model gives are relative to the workspace. They are resolved with every symlink
followed and must stay inside it: a link a command left pointing elsewhere is refused, as
is `..`. The agent's calls run one at a time and no process of a command outlives it, so
nothing changes a path between its check and its use.
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from schemas.address import parse_address
from services.workspace.volumes import Volumes

UID_BASE = 1_500_000
UID_SPAN = 1_000_000
LIST_LIMIT = 500


class WorkspaceError(Exception):
    """A refused path or write; the message is a sentence for the model."""


def workspace_uid(address: str) -> int:
    """A uid of the agent's own (used when the service runs as root): stable, and far
    from the uids people and daemons have."""
    return UID_BASE + zlib.crc32(address.encode()) % UID_SPAN


@dataclass(frozen=True)
class Workspace:
    root: Path
    uid: int
    quota_bytes: int
    kernel_quota: bool = False
    """A subvolume of the workspaces' filesystem, whose quota the kernel holds."""

    def resolve(self, relative: str) -> Path:
        """The path inside the workspace; raises WorkspaceError for any other."""
        if not relative or relative.startswith("/") or "\0" in relative:
            raise WorkspaceError(
                f"{relative!r} is not a path inside the workspace: give a relative path "
                "such as notes/todo.txt"
            )
        base = self.root.resolve()
        # Not Path.resolve: it raises RuntimeError on a link loop. realpath leaves a loop
        # unresolved, and opening it (O_NOFOLLOW) then says ELOOP.
        path = Path(os.path.realpath(base / relative))
        if path != base and not path.is_relative_to(base):
            raise WorkspaceError(f"{relative!r} leads outside the workspace, which is refused.")
        return path

    def usage(self) -> int:
        return sum(entry.size for entry in snapshot(self.root).values())

    def own(self, path: Path) -> None:
        """Give what the service wrote to the workspace's uid, so commands may change it."""
        if os.geteuid() == 0:
            os.chown(path, self.uid, self.uid, follow_symlinks=False)


LENT_MODE = 0o755
"""A workspace's folders (and `WORKSPACE_UMASK` for what is written in them) let the
agent's children, each running as a uid of its own, read it where it is lent to them. The
home around the workspaces is private to the service user (0700), so nobody else on the
host reaches them, and a sandbox mounts no workspace but its own and the one lent to it."""
WORKSPACE_UMASK = 0o022


def open_workspace(
    home: Path, address: str, quota_bytes: int, volumes: Volumes | None = None
) -> Workspace:
    """The agent's workspace, made on first use: with `volumes`, a subvolume whose limit is
    set to `quota_bytes` on every call (a new spec version may have changed it). A folder
    made there by hand is no subvolume, and has no `kernel_quota`."""
    tenant = parse_address(address).tenant
    root = home / "workspaces" / tenant / address
    workspace = Workspace(root, workspace_uid(address), quota_bytes)
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        if volumes is None:
            root.mkdir()
        else:
            volumes.make(root)
        root.chmod(LENT_MODE)
        workspace.own(root)
    if volumes is not None and volumes.limit(root, quota_bytes):
        return Workspace(root, workspace.uid, quota_bytes, kernel_quota=True)
    return workspace


def existing_workspace(home: Path, address: str) -> Path | None:
    root = home / "workspaces" / parse_address(address).tenant / address
    return root if root.is_dir() else None


@dataclass(frozen=True)
class FileStat:
    """What tells a changed file from an unchanged one between two snapshots."""

    size: int
    mtime_ns: int
    inode: int


def snapshot(root: Path) -> dict[str, FileStat]:
    """Every regular file under `root`, by relative path; symlinks are not followed."""
    found: dict[str, FileStat] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode):
                relative = path.relative_to(root).as_posix()
                found[relative] = FileStat(info.st_size, info.st_mtime_ns, info.st_ino)
    return found


def changed(before: dict[str, FileStat], after: dict[str, FileStat]) -> list[str]:
    return sorted(path for path, entry in after.items() if before.get(path) != entry)


def read_text(workspace: Workspace, relative: str, limit: int) -> str:
    path = workspace.resolve(relative)
    with explained(relative, "read"):
        descriptor = _open_regular(path, relative, os.O_RDONLY)
        with os.fdopen(descriptor, "rb") as file:
            data = file.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        text += f"\n[... the file is longer than {limit} bytes; the rest is not shown ...]"
    return text


def write_text(workspace: Workspace, relative: str, content: str) -> Path:
    path = workspace.resolve(relative)
    data = content.encode()
    with explained(relative, "written"):
        found = _lstat(path)
        if found is not None:
            _refuse_unless_regular(found.st_mode, relative)
        old = found.st_size if found is not None else 0
        used = workspace.usage()
        if used - old + len(data) > workspace.quota_bytes:
            raise WorkspaceError(
                f"Writing {len(data)} bytes to {relative!r} would pass the workspace quota of "
                f"{workspace.quota_bytes} bytes ({used} used)."
            )
        created = _make_parents(workspace, path)
        descriptor = _open_regular(path, relative, os.O_WRONLY | os.O_CREAT)
        with os.fdopen(descriptor, "wb") as file:
            file.truncate(0)
            file.write(data)
        for made in (*created, path):
            workspace.own(made)
    return path


_NO_WAIT = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""Never follow a link (the path is resolved already: a link left is a loop), never wait
(a named pipe without a reader, a device), never adopt a terminal."""

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse_unless_regular(mode: int, relative: str) -> None:
    if stat.S_ISLNK(mode):
        raise WorkspaceError(_LOOP.format(relative=relative))
    if not stat.S_ISREG(mode):
        raise WorkspaceError(
            f"{relative!r} is {_kind(mode)}, not a regular file: the file tools read and "
            "write only regular files."
        )


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _open_regular(path: Path, relative: str, flags: int) -> int:
    """A descriptor of the regular file at `path`; anything else is refused before it is
    opened, and again after (`fstat`), should it have changed in between."""
    found = _lstat(path)
    if found is None and not flags & os.O_CREAT:
        raise WorkspaceError(f"There is no file {relative!r} in the workspace.")
    if found is not None:
        _refuse_unless_regular(found.st_mode, relative)
    descriptor = os.open(path, flags | _NO_WAIT, 0o644)
    try:
        _refuse_unless_regular(os.fstat(descriptor).st_mode, relative)
        if found is None:
            os.fchmod(descriptor, 0o644)
    except WorkspaceError:
        os.close(descriptor)
        raise
    return descriptor


_LOOP = (
    "{relative!r} is a symbolic link that leads in a loop (or through too many links), so it "
    "cannot be followed."
)
_ERRNO_SENTENCES = {
    errno.ELOOP: _LOOP,
    errno.ENOENT: "There is no file {relative!r} in the workspace.",
    errno.ENOTDIR: "A part of {relative!r} is not a folder.",
    errno.EISDIR: "{relative!r} is a folder, not a file.",
    errno.ENXIO: "{relative!r} is a socket or a named pipe, not a regular file.",
    errno.EACCES: "{relative!r} cannot be {verb}: permission denied.",
    errno.EPERM: "{relative!r} cannot be {verb}: permission denied.",
    errno.ENAMETOOLONG: "The path {relative!r} is too long.",
    errno.ENOSPC: "{relative!r} cannot be {verb}: the disk is full.",
    errno.EDQUOT: "{relative!r} cannot be {verb}: the workspace's quota is used up.",
    errno.EROFS: "{relative!r} cannot be {verb}: the workspace is read-only.",
    errno.EEXIST: "A part of {relative!r} already exists and is not a folder.",
}


@contextmanager
def explained(relative: str, verb: str) -> Iterator[None]:
    """Turn the system's refusals into sentences about the path the model gave (never
    the host's path, never an exception's text)."""
    try:
        yield
    except OSError as error:
        template = _ERRNO_SENTENCES.get(error.errno or 0)
        if template is None:
            reason = os.strerror(error.errno) if error.errno else "the system refused it"
            template = "{relative!r} cannot be {verb}: " + reason.lower() + "."
        raise WorkspaceError(template.format(relative=relative, verb=verb)) from None


def _make_parents(workspace: Workspace, path: Path) -> list[Path]:
    base = workspace.root.resolve()
    missing = [p for p in reversed(path.parents) if p.is_relative_to(base)]
    created = [p for p in missing if _lstat(p) is None]
    for folder in created:
        folder.mkdir()
        folder.chmod(LENT_MODE)
    return created


SCAN_LIMIT = 10_000
"""Entries `list_files` looks at, at most, so a listing ends quickly however many files a
command left."""


def list_entries(workspace: Workspace, relative: str) -> str:
    base = workspace.resolve(relative) if relative not in ("", ".") else workspace.root
    with explained(relative, "listed"):
        found = _lstat(base)
        if found is None:
            raise WorkspaceError(f"There is no folder {relative!r} in the workspace.")
        if not stat.S_ISDIR(found.st_mode):
            if stat.S_ISLNK(found.st_mode):
                raise WorkspaceError(_LOOP.format(relative=relative))
            raise WorkspaceError(f"{relative!r} is {_kind(found.st_mode)}, not a folder.")
        entries, complete = _scan(base)
    lines = [f"{path}\t{size}" for path, size in sorted(entries.items())]
    if not lines and complete:
        return "(no files)"
    shown = "\n".join(lines[:LIST_LIMIT])
    if len(lines) > LIST_LIMIT:
        shown += f"\n[... {len(lines) - LIST_LIMIT} more files ...]"
    if not complete:
        shown += f"\n[... the listing stopped after {SCAN_LIMIT} entries ...]"
    return shown


def _scan(base: Path) -> tuple[dict[str, int], bool]:
    """Regular files under `base` by relative path, with their sizes; False when it stopped
    at `SCAN_LIMIT` entries. Links are not followed."""
    found: dict[str, int] = {}
    seen = 0
    folders = [base]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > SCAN_LIMIT:
                    return found, False
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    relative = Path(entry.path).relative_to(base).as_posix()
                    found[relative] = entry.stat(follow_symlinks=False).st_size
    return found, True
