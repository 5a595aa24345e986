"""Workspace paths stay inside; writes respect the quota; artifacts are stored by hash."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.workspace.artifacts import artifact_path, store_file
from services.workspace.files import (
    SCAN_LIMIT,
    WorkspaceError,
    list_entries,
    open_workspace,
    read_text,
    write_text,
)


def test_paths_that_leave_the_workspace_are_refused(tmp_path: Path) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 2**20)
    (tmp_path / "secret.txt").write_text("secret")
    (workspace.root / "link").symlink_to(tmp_path / "secret.txt")
    (workspace.root / "up").symlink_to(tmp_path)
    (workspace.root / "hop").symlink_to("up/secret.txt")
    escapes = ("../secret.txt", "/etc/passwd", "link", "a/../../secret.txt", "up/secret.txt")
    for path in (*escapes, "hop", ""):
        with pytest.raises(WorkspaceError):
            read_text(workspace, path, 1000)
    for path in ("link", "up/secret.txt", "hop", "up/new.txt"):
        with pytest.raises(WorkspaceError, match="leads outside the workspace"):
            write_text(workspace, path, "overwritten")
    with pytest.raises(WorkspaceError, match="leads outside the workspace"):
        list_entries(workspace, "up")
    assert (tmp_path / "secret.txt").read_text() == "secret"
    assert not (tmp_path / "new.txt").exists()


def test_writes_past_the_quota_are_refused(tmp_path: Path) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 100)
    write_text(workspace, "a.txt", "x" * 60)
    write_text(workspace, "a.txt", "y" * 90)  # replacing counts the old size out
    with pytest.raises(WorkspaceError, match="quota of 100 bytes"):
        write_text(workspace, "b.txt", "z" * 20)
    assert list_entries(workspace, "") == "a.txt\t90"


def test_artifacts_are_stored_by_content(tmp_path: Path) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 2**20)
    path = write_text(workspace, "dir/out.txt", "hello")
    artifact = store_file(tmp_path / "store", path, "dir/out.txt")
    assert artifact.sha256 == hashlib.sha256(b"hello").hexdigest()
    assert artifact.size == 5
    stored = artifact_path(tmp_path / "store", artifact.sha256)
    assert stored is not None
    assert stored.read_bytes() == b"hello"
    assert artifact_path(tmp_path / "store", "../" + artifact.sha256[3:]) is None


def timed(action: Callable[[], object]) -> tuple[float, str]:
    """How long `action` took to be refused, and the sentence."""
    started = time.monotonic()
    with pytest.raises(WorkspaceError) as refused:
        action()
    return time.monotonic() - started, str(refused.value)


def special_files(root: Path) -> None:
    os.mkfifo(root / "pipe")
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "zero").symlink_to("/dev/zero")
    listener = socket.socket(socket.AF_UNIX)
    # A socket's path must be short: bind it relative to the workspace.
    cwd = Path.cwd()
    os.chdir(root)
    try:
        listener.bind("sock")
    finally:
        os.chdir(cwd)
    listener.close()


@pytest.mark.parametrize(
    ("action", "path", "says"),
    [
        ("write", "pipe", "'pipe' is a named pipe (FIFO), not a regular file"),
        ("read", "pipe", "'pipe' is a named pipe (FIFO), not a regular file"),
        ("read", "a", "'a' is a symbolic link that leads in a loop"),
        ("write", "a", "'a' is a symbolic link that leads in a loop"),
        ("read", "a/inside.txt", "'a/inside.txt' is a symbolic link that leads in a loop"),
        ("list", "a", "'a' is a symbolic link that leads in a loop"),
        ("read", "sock", "'sock' is a socket, not a regular file"),
        ("write", "sock", "'sock' is a socket, not a regular file"),
        ("read", "zero", "'zero' leads outside the workspace"),
        ("list", "pipe", "'pipe' is a named pipe (FIFO), not a folder"),
    ],
)
def test_what_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, action: str, path: str, says: str
) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 2**20)
    special_files(workspace.root)
    actions: dict[str, Callable[[], object]] = {
        "read": lambda: read_text(workspace, path, 1000),
        "write": lambda: write_text(workspace, path, "x"),
        "list": lambda: list_entries(workspace, path),
    }
    seconds, sentence = timed(actions[action])
    assert seconds < 1
    assert says in sentence
    assert str(tmp_path) not in sentence
    assert "Errno" not in sentence


def test_a_device_in_the_workspace_is_refused_unopened(tmp_path: Path) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 2**20)
    try:
        os.mknod(workspace.root / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD (the sandbox never grants it)")
    for action in (
        lambda: read_text(workspace, "zero", 1000),
        lambda: write_text(workspace, "zero", "x"),
    ):
        seconds, sentence = timed(action)
        assert seconds < 1
        assert sentence.startswith("'zero' is a character device, not a regular file")


def test_links_inside_the_workspace_still_work_and_the_listing_skips_specials(
    tmp_path: Path,
) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 2**20)
    special_files(workspace.root)
    write_text(workspace, "dir/real.txt", "hello")
    (workspace.root / "alias").symlink_to("dir/real.txt")
    assert read_text(workspace, "alias", 1000) == "hello"
    write_text(workspace, "alias", "changed")
    assert (workspace.root / "dir" / "real.txt").read_text() == "changed"
    assert list_entries(workspace, "") == "dir/real.txt\t7"


def test_a_listing_stops_at_its_scan_limit(tmp_path: Path) -> None:
    workspace = open_workspace(tmp_path, "acme.a", 2**30)
    for n in range(SCAN_LIMIT + 10):
        (workspace.root / f"f{n}").touch()
    started = time.monotonic()
    listing = list_entries(workspace, "")
    assert time.monotonic() - started < 1
    assert listing.endswith(f"[... the listing stopped after {SCAN_LIMIT} entries ...]")
