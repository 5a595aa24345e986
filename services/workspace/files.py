"""Workspace directories: one per agent under `TEASPILL_HOME/workspaces`, created on first
use, owned by the workspace's own uid, with a size quota.

Paths the model gives are relative to the workspace. They are resolved with every symlink
followed and must stay inside it: a link a command left pointing elsewhere is refused, as
is `..`. The agent's calls run one at a time and no process of a command outlives it, so
nothing changes a path between its check and its use.
"""

from __future__ import annotations

import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path

from schemas.address import parse_address

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

    def resolve(self, relative: str) -> Path:
        """The path inside the workspace; raises WorkspaceError for any other."""
        if not relative or relative.startswith("/") or "\0" in relative:
            raise WorkspaceError(
                f"{relative!r} is not a path inside the workspace: give a relative path "
                "such as notes/todo.txt"
            )
        base = self.root.resolve()
        path = (base / relative).resolve()
        if path != base and not path.is_relative_to(base):
            raise WorkspaceError(f"{relative!r} leads outside the workspace, which is refused.")
        return path

    def usage(self) -> int:
        return sum(entry.size for entry in snapshot(self.root).values())

    def own(self, path: Path) -> None:
        """Give what the service wrote to the workspace's uid, so commands may change it."""
        if os.geteuid() == 0:
            os.chown(path, self.uid, self.uid, follow_symlinks=False)


def open_workspace(home: Path, address: str, quota_bytes: int) -> Workspace:
    tenant = parse_address(address).tenant
    root = home / "workspaces" / tenant / address
    workspace = Workspace(root, workspace_uid(address), quota_bytes)
    if not root.is_dir():
        root.mkdir(parents=True, mode=0o755)
        workspace.own(root)
    return workspace


def existing_workspace(home: Path, address: str) -> Path | None:
    root = home / "workspaces" / parse_address(address).tenant / address
    return root if root.is_dir() else None


@dataclass(frozen=True)
class Entry:
    size: int
    mtime_ns: int
    inode: int


def snapshot(root: Path) -> dict[str, Entry]:
    """Every regular file under `root`, by relative path; symlinks are not followed."""
    found: dict[str, Entry] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode):
                relative = path.relative_to(root).as_posix()
                found[relative] = Entry(info.st_size, info.st_mtime_ns, info.st_ino)
    return found


def changed(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    return sorted(path for path, entry in after.items() if before.get(path) != entry)


def read_text(workspace: Workspace, relative: str, limit: int) -> str:
    path = workspace.resolve(relative)
    if not path.is_file():
        raise WorkspaceError(f"There is no file {relative!r} in the workspace.")
    with path.open("rb") as file:
        data = file.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        text += f"\n[... the file is longer than {limit} bytes; the rest is not shown ...]"
    return text


def write_text(workspace: Workspace, relative: str, content: str) -> Path:
    path = workspace.resolve(relative)
    data = content.encode()
    old = path.stat().st_size if path.is_file() else 0
    used = workspace.usage()
    if used - old + len(data) > workspace.quota_bytes:
        raise WorkspaceError(
            f"Writing {len(data)} bytes to {relative!r} would pass the workspace quota of "
            f"{workspace.quota_bytes} bytes ({used} used)."
        )
    if path.is_dir():
        raise WorkspaceError(f"{relative!r} is a folder, not a file.")
    created = _make_parents(workspace, path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    descriptor = os.open(path, flags, 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    for made in (*created, path):
        workspace.own(made)
    return path


def _make_parents(workspace: Workspace, path: Path) -> list[Path]:
    missing = [p for p in reversed(path.parents) if p.is_relative_to(workspace.root.resolve())]
    created = [p for p in missing if not p.exists()]
    for folder in created:
        folder.mkdir(mode=0o755)
    return created


def list_entries(workspace: Workspace, relative: str) -> str:
    base = workspace.resolve(relative) if relative not in ("", ".") else workspace.root
    if not base.is_dir():
        raise WorkspaceError(f"There is no folder {relative!r} in the workspace.")
    entries = snapshot(base)
    lines = [f"{path}\t{entry.size}" for path, entry in sorted(entries.items())]
    if not lines:
        return "(no files)"
    shown = "\n".join(lines[:LIST_LIMIT])
    if len(lines) > LIST_LIMIT:
        shown += f"\n[... {len(lines) - LIST_LIMIT} more files ...]"
    return shown
