"""A fork's copy of a workspace takes what is inside it and nothing else: a link stays a
link, and a folder swapped for a link while the copy runs (a command of the source may
do that) is not followed out of the workspace."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from services.workspace import files
from services.workspace.files import existing_workspace, open_workspace
from services.workspace.lifecycle import copy_workspace

MARKER = "another tenant's notes"
NAMES = ("notes.txt", "todo.txt")


def _source(home: Path) -> Path:
    other = open_workspace(home, "other.keeper", 2**20).root
    for name in NAMES:
        (other / name).write_text(MARKER)
    root = open_workspace(home, "acme.src", 2**20).root
    (root / "b").mkdir()
    for name in NAMES:
        (root / "b" / name).write_text("acme.src's own")
    (root / "link").symlink_to("../../other/other.keeper")
    return root


def _everything(root: Path) -> str:
    texts = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if not path.is_symlink():
                texts.append(path.read_text())
    return "\n".join(texts)


def test_a_copy_keeps_links_as_links_and_reads_nothing_outside(tmp_path: Path) -> None:
    _source(tmp_path)

    copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None)

    fork = existing_workspace(tmp_path, "acme.fork")
    assert fork is not None
    assert (fork / "b" / "notes.txt").read_text() == "acme.src's own"
    assert (fork / "link").readlink() == Path("../../other/other.keeper")
    assert MARKER not in _everything(fork)


def test_a_folder_swapped_for_a_link_during_the_copy_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _source(tmp_path)
    own = files.Workspace.own
    swapped: list[Path] = []

    def own_then_swap(self: files.Workspace, path: Path) -> None:
        """Once the copy took the first file of `b`, the source moves `b` away and puts a
        link to another tenant's workspace in its place, as a command running in the
        source can while a fork copies it."""
        own(self, path)
        if path.parent.name == "b" and path.is_file() and not swapped:
            (root / "b").rename(root / "b-moved")
            (root / "b").symlink_to("../../other/other.keeper")
            swapped.append(path)

    monkeypatch.setattr(files.Workspace, "own", own_then_swap)

    copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None)

    fork = existing_workspace(tmp_path, "acme.fork")
    assert fork is not None
    assert swapped
    assert MARKER not in _everything(fork)


def test_a_copy_that_cannot_write_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a source that changed is skipped; a write of the copy's own that fails (its
    quota, a full disk) fails the copy, which is not left half made as if complete."""
    _source(tmp_path)

    def full(*_: object) -> None:
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    with pytest.raises(OSError, match="quota"):
        copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None)
