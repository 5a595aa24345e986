"""A workspace's copy for a fork, and the erasure of workspaces and artifacts.

The copy takes the files as they are when the fork is made (a workspace keeps no history
to go back to), links as links, each owned by the new agent's uid; a copy started again
after a crash copies everything again over what it had copied. Erasing removes the
folder (a subvolume's contents, then the subvolume itself, which the kernel lets root
remove once it is empty) and the artifacts named, which only the erased agents wrote.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from schemas.workspace import artifact_name
from services.workspace.files import LENT_MODE, existing_workspace, open_workspace
from services.workspace.volumes import Volumes


def copy_workspace(
    home: Path, source: str, target: str, quota_bytes: int, volumes: Volumes | None
) -> int:
    """Copy `source`'s workspace into `target`'s (made if need be); the files copied."""
    found = existing_workspace(home, source)
    if found is None:
        return 0
    workspace = open_workspace(home, target, quota_bytes, volumes)
    copied = 0
    for folder, dirs, names in os.walk(found):
        here = Path(folder)
        into = workspace.root / here.relative_to(found)
        for name in dirs:
            if not (here / name).is_symlink():
                (into / name).mkdir(mode=LENT_MODE, exist_ok=True)
                workspace.own(into / name)
        for name in [*names, *(d for d in dirs if (here / d).is_symlink())]:
            _copy_entry(here / name, into / name)
            workspace.own(into / name)
            copied += 1
    return copied


def _copy_entry(source: Path, target: Path) -> None:
    if target.is_symlink() or target.is_file():
        target.unlink()
    if source.is_symlink():
        target.symlink_to(source.readlink())
    elif source.is_file():
        shutil.copy2(source, target, follow_symlinks=False)


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
