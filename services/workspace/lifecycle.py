"""A workspace's copy for a fork, and the erasure of workspaces and artifacts.

The copy takes the files as they are when the fork is made (a workspace keeps no history
to go back to), links as links (never read through, even one swapped in mid-copy), each
owned by the new agent's uid. It is made in a fresh folder of its own, private to the
service, and renamed into place once whole: it never writes into a folder that exists, so
no link left in one (an archived agent's, a deleted one's) leads the copy elsewhere. A
copy started again after a crash throws away what the first attempt made. Erasing removes
the folder (a subvolume's contents, then the subvolume itself, which the kernel lets root
remove once it is empty) and the artifacts named, which only the erased agents wrote.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from schemas.address import parse_address
from schemas.workspace import artifact_name
from services.workspace.copies import FOLDER, CopyRules, copy_tree, count_tree
from services.workspace.files import LENT_MODE, existing_workspace, workspace_uid
from services.workspace.volumes import Volumes


def occupied(home: Path, address: str) -> bool:
    """Whether `address` has a workspace (or anything else in its place) already."""
    return os.path.lexists(_place(home, address))


def copy_workspace(
    home: Path, source: str, target: str, quota_bytes: int, volumes: Volumes | None
) -> int:
    """Give `target` a copy of `source`'s workspace; the files and links copied.

    The source may be changing while it is copied (a command of its agent runs), and this
    runs as the service user, which may read every workspace: `copy_tree` reaches every
    entry of both sides from its folder's descriptor and never follows a link. A target
    that has a workspace already is left as it is (and counted): the fork refused an
    address that had one before it began (`occupied`), so it is what an earlier attempt of
    this copy renamed into place before it could answer."""
    place = _place(home, target)
    if os.path.lexists(place):
        return count_tree(place)
    found = existing_workspace(home, source)
    if found is None:
        return 0
    place.parent.mkdir(parents=True, exist_ok=True)
    staging = place.with_name(f".fork-{target}")  # no address begins with a dot
    if os.path.lexists(staging):
        shutil.rmtree(staging)  # an attempt cut short by a crash
    _make(staging, quota_bytes, volumes)
    try:
        folder = os.open(staging, FOLDER)
        try:
            copied = copy_tree(found, folder, _rules(target))
        finally:
            os.close(folder)
        staging.rename(place)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return copied.files


def _place(home: Path, address: str) -> Path:
    return home / "workspaces" / parse_address(address).tenant / address


def _make(staging: Path, quota_bytes: int, volumes: Volumes | None) -> None:
    """A private folder (with `volumes`, a subvolume limited to the quota as it fills)."""
    if volumes is None:
        staging.mkdir(mode=0o700)
        return
    volumes.make(staging)
    staging.chmod(0o700)
    volumes.limit(staging, quota_bytes)


def _rules(target: str) -> CopyRules:
    uid = workspace_uid(target)
    owner = (uid, uid) if os.geteuid() == 0 else None
    return CopyRules(owner=lambda found: owner, folder_mode=LENT_MODE)


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
