"""A fork's copy of a workspace takes what is inside it and nothing else: a link stays a
link, a folder swapped for a link while the copy runs (a command of the source may do
that) is not followed out of the workspace, and the copy never writes into a folder that
exists, through whatever links it holds."""

from __future__ import annotations

import errno
import os
import shutil
import socket
from pathlib import Path

import pytest

from services.workspace import copies
from services.workspace.files import existing_workspace, open_workspace
from services.workspace.lifecycle import copy_workspace, occupied

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
    copy_file = copies._file
    swapped: list[str] = []

    def copy_then_swap(level: copies._Level, name: str, relative: str, *rest: object) -> int:
        """Once the copy took the first file of `b`, the source moves `b` away and puts a
        link to another tenant's workspace in its place, as a command running in the
        source can while a fork copies it."""
        done = copy_file(level, name, relative, *rest)  # type: ignore[arg-type]
        if relative.startswith("b/") and not swapped:
            (root / "b").rename(root / "b-moved")
            (root / "b").symlink_to("../../other/other.keeper")
            swapped.append(relative)
        return done

    monkeypatch.setattr(copies, "_file", copy_then_swap)

    copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None)

    fork = existing_workspace(tmp_path, "acme.fork")
    assert fork is not None
    assert swapped
    assert MARKER not in _everything(fork)
    assert sorted(p.name for p in (fork / "b").iterdir()) == list(NAMES)


def test_a_copy_that_cannot_write_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a source that changed is skipped; a write of the copy's own that fails (its
    quota, a full disk) fails the copy, which is not left half made as if complete."""
    _source(tmp_path)

    def full(*_: object) -> None:
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    with pytest.raises(OSError, match="quota"):
        copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None)
    assert _names(tmp_path / "workspaces" / "acme") == ["acme.src"]


def _victim(home: Path) -> Path:
    victim = open_workspace(home, "bravo.agent", 2**20).root
    (victim / "notes.txt").write_text("bravo's own")
    return victim


def test_a_copy_never_writes_into_a_workspace_that_exists_through_its_links(
    tmp_path: Path,
) -> None:
    """An archived agent's workspace stays where it was, and may hold a link to another
    tenant's: a copy onto it writes nothing there (the fork refuses such a target before
    it copies; this is the copy's own guard)."""
    victim = _victim(tmp_path)
    left = open_workspace(tmp_path, "acme.x", 2**20).root
    (left / "d").symlink_to("../../bravo/bravo.agent")
    source = open_workspace(tmp_path, "acme.src", 2**20).root
    (source / "d").mkdir()
    (source / "d" / "notes.txt").write_text("acme's")
    assert occupied(tmp_path, "acme.x")

    assert copy_workspace(tmp_path, "acme.src", "acme.x", 2**20, None) == 1

    assert (victim / "notes.txt").read_text() == "bravo's own"
    assert _names(left) == ["d"]
    assert (left / "d").is_symlink()


def test_a_copy_tried_again_after_the_source_changed_writes_nothing_more(
    tmp_path: Path,
) -> None:
    """Between two attempts of the same copy (a step tried again), the source swaps its
    link for a folder of that name: the second attempt leaves the first one's copy be."""
    victim = _victim(tmp_path)
    source = open_workspace(tmp_path, "acme.src", 2**20).root
    (source / "d").symlink_to("../../bravo/bravo.agent")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(source / "sock"))
    first = copy_workspace(tmp_path, "acme.src", "acme.new", 2**20, None)
    (source / "d").unlink()
    (source / "d").mkdir()
    (source / "d" / "planted").write_text("from acme")
    listening.close()

    again = copy_workspace(tmp_path, "acme.src", "acme.new", 2**20, None)

    assert again == first == 1
    assert _names(victim) == ["notes.txt"]
    fork = existing_workspace(tmp_path, "acme.new")
    assert fork is not None
    assert _names(fork) == ["d"]
    assert (fork / "d").readlink() == Path("../../bravo/bravo.agent")


def test_a_copy_cut_short_is_thrown_away_and_made_again(tmp_path: Path) -> None:
    _source(tmp_path)
    cut = tmp_path / "workspaces" / "acme" / ".fork-acme.fork"
    cut.mkdir(parents=True)
    (cut / "half.txt").write_text("half")
    (cut / "b").symlink_to("../../other/other.keeper")

    assert copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None) == 3

    fork = existing_workspace(tmp_path, "acme.fork")
    assert fork is not None
    assert _names(fork) == ["b", "link"]
    assert not cut.exists()
    assert MARKER not in _everything(fork)
    assert (fork.stat().st_mode & 0o777, (fork / "b").stat().st_mode & 0o777) == (0o755, 0o755)


def test_a_fifo_a_socket_or_setuid_bits_are_not_copied(tmp_path: Path) -> None:
    source = open_workspace(tmp_path, "acme.src", 2**20).root
    os.mkfifo(source / "pipe")
    tool = source / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o4755)

    assert copy_workspace(tmp_path, "acme.src", "acme.fork", 2**20, None) == 1

    fork = existing_workspace(tmp_path, "acme.fork")
    assert fork is not None
    assert _names(fork) == ["tool"]
    assert (fork / "tool").stat().st_mode & 0o7777 == 0o755


def _names(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())
