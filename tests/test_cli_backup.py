"""`teaspill backup`: in-process, on files made here (no stack needed for what is refused,
nor for a backup of a home whose stack is down)."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from services.cli.main import main
from services.lifecycle import backup
from services.stack import isolated_settings


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose stack is down, holding a little of each part a backup keeps."""
    made = tmp_path / "home"
    (made / "restate" / "teaspill" / "db").mkdir(parents=True)
    (made / "restate" / "teaspill" / "db" / "000001.sst").write_bytes(b"table" * 100)
    (made / "workspaces" / "acme" / "acme.a").mkdir(parents=True)
    (made / "workspaces" / "acme" / "acme.a" / "notes.txt").write_text("kept")
    (made / "workspaces" / "acme" / "acme.a" / "link").symlink_to("notes.txt")
    (made / "projection.db").write_bytes(b"derived")
    settings = isolated_settings(made)
    monkeypatch.setenv("TEASPILL_HOME", str(made))
    monkeypatch.setenv("TEASPILL_ADMIN_PORT", str(settings.admin_port))
    return made


def test_a_backup_of_a_stopped_home_restores_into_a_fresh_one(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "b.tar.gz"
    assert main(["backup", "create", str(archive)]) == 0
    assert "the stack was down" in capsys.readouterr().out
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile(names[0]).read())  # type: ignore[union-attr]
    assert names[0] == "manifest.json"
    assert (manifest["format"], manifest["version"]) == ("teaspill-backup", 1)
    assert "projection.db" not in names
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    assert main(["backup", "create", str(archive)]) == 1
    assert "exists already" in capsys.readouterr().err

    fresh = tmp_path / "fresh"
    monkeypatch.setenv("TEASPILL_HOME", str(fresh))
    assert main(["backup", "restore", str(archive)]) == 0
    restored = fresh / "workspaces" / "acme" / "acme.a"
    assert (restored / "notes.txt").read_text() == "kept"
    assert (restored / "link").readlink() == Path("notes.txt")
    assert (fresh / "restate" / "teaspill" / "db" / "000001.sst").read_bytes() == b"table" * 100
    assert (fresh / "restored.json").is_file()
    assert main(["backup", "restore", str(archive)]) == 1
    assert "holds an installation already" in capsys.readouterr().err


def test_a_damaged_archive_is_refused_with_a_sentence_and_nothing_written(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "b.tar.gz"
    assert main(["backup", "create", str(archive)]) == 0
    raw = bytearray(gzip.decompress(archive.read_bytes()))
    at = raw.index(b"kept")
    raw[at] ^= 0x01
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(gzip.compress(bytes(raw)))
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("TEASPILL_HOME", str(fresh))
    capsys.readouterr()

    assert main(["backup", "restore", str(damaged)]) == 1

    said = capsys.readouterr().err
    assert "is not the file the manifest names" in said
    assert "nothing was written" in said
    assert not fresh.exists()


def test_a_fifo_or_a_socket_in_a_workspace_is_left_out_and_named(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any tenant can make one in its workspace: the backup goes on without it, and says
    what it left out, in its output and its manifest."""
    root = home / "workspaces" / "acme" / "acme.a"
    os.mkfifo(root / "pipe")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(root / "sock"))
    archive = tmp_path / "b.tar.gz"

    try:
        assert main(["backup", "create", str(archive)]) == 0
    finally:
        listening.close()

    said = capsys.readouterr().out
    assert "Left out 2 entries that are neither a file, a folder nor a link" in said
    assert "workspaces/acme/acme.a/pipe, workspaces/acme/acme.a/sock." in said
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile(names[0]).read())  # type: ignore[union-attr]
    assert manifest["skipped"] == {
        "count": 2,
        "paths": ["workspaces/acme/acme.a/pipe", "workspaces/acme/acme.a/sock"],
    }
    assert "workspaces/acme/acme.a/notes.txt" in names
    assert not any(name.endswith(("pipe", "sock")) for name in names)


def test_a_file_swapped_for_a_link_while_it_is_copied_is_not_read_through(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command in acme.a's workspace swaps its file for a link to another tenant's file
    just after the backup looked at it: the copy holds no byte of the other tenant's."""
    victim = home / "workspaces" / "bravo" / "bravo.b"
    victim.mkdir(parents=True)
    (victim / "secret.txt").write_text("bravo's secret")
    notes = home / "workspaces" / "acme" / "acme.a" / "notes.txt"
    look = os.stat
    swapped: list[str] = []

    def look_then_swap(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        found = look(path, *args, **kwargs)
        looked = os.fspath(path) == "notes.txt" or Path(os.fspath(path)) == notes
        if looked and not kwargs.get("follow_symlinks", True) and not swapped:
            notes.unlink()
            notes.symlink_to("../../bravo/bravo.b/secret.txt")
            swapped.append(os.fspath(path))
        return found

    monkeypatch.setattr(os, "stat", look_then_swap)
    archive = tmp_path / "b.tar.gz"

    assert main(["backup", "create", str(archive)]) == 0

    monkeypatch.setattr(os, "stat", look)
    assert swapped
    raw = gzip.decompress(archive.read_bytes())
    assert raw.count(b"bravo's secret") == 1  # bravo's own copy, not acme's
    with tarfile.open(archive) as tar:
        kinds = {member.name: member.type for member in tar.getmembers()}
    assert kinds.get("workspaces/acme/acme.a/notes.txt") in (None, tarfile.SYMTYPE)


def test_a_copy_that_outlives_the_watchdog_fails_and_leaves_no_archive(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog thaws restate-server (here a stand-in process group) while the copy
    still runs: what was copied after that is no consistent cut, so nothing is kept."""
    server = subprocess.Popen(["sleep", "300"], start_new_session=True)
    copy_part = backup._copy_part
    thawed: list[bool] = []

    def copy_until_thawed(source: Path, target: Path, part: str) -> list[str]:
        """Copying the workspaces outlasts the pause: it ends once the watchdog has
        thawed the server (waited for as its parent, no polling)."""
        while part == "workspaces" and not thawed:
            _pid, status = os.waitpid(server.pid, os.WUNTRACED | os.WCONTINUED)
            thawed.extend([True] if os.WIFCONTINUED(status) else [])
        return copy_part(source, target, part)

    monkeypatch.setattr(backup, "MOST_PAUSE", 1)
    monkeypatch.setattr(backup, "_copy_part", copy_until_thawed)
    archive = tmp_path / "b.tar.gz"
    try:
        with pytest.raises(backup.BackupError) as failed:
            backup.create_backup(home, archive, pids=[server.pid], about={})
    finally:
        server.kill()
        server.wait()

    assert thawed
    assert "the watchdog thawed it while its files were copied" in str(failed.value)
    assert "no backup was written" in str(failed.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    assert not [p for p in home.iterdir() if p.name.startswith(".backup-")]
