"""Workspace paths stay inside; writes respect the quota; artifacts are stored by hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from services.workspace.artifacts import artifact_path, store_file
from services.workspace.files import (
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
    for path in ("../secret.txt", "/etc/passwd", "link", "a/../../secret.txt", ""):
        with pytest.raises(WorkspaceError):
            read_text(workspace, path, 1000)
    with pytest.raises(WorkspaceError):
        write_text(workspace, "link", "overwritten")
    assert (tmp_path / "secret.txt").read_text() == "secret"


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
