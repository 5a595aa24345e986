"""A restore of a crafted archive writes nothing, and one it accepts writes only inside the
home: no member is extracted through a link, no link leads out of its part or stands for
a workspace's folder, and no file keeps a setuid or setgid bit. Archives made here, on
scratch folders."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.lifecycle.backup import BackupError
from services.lifecycle.restore import restore_backup

PAYLOAD = b"planted\n"


@dataclass(frozen=True)
class Member:
    name: str
    kind: bytes = tarfile.REGTYPE
    data: bytes = b""
    link: str = ""
    mode: int = 0o644
    uid: int = 0


def _archive(path: Path, members: Iterable[Member]) -> Path:
    """A backup holding `members`, its manifest naming each regular file's digest."""
    members = list(members)
    files = [
        {"path": m.name, "size": len(m.data), "sha256": hashlib.sha256(m.data).hexdigest()}
        for m in members
        if m.kind == tarfile.REGTYPE
    ]
    manifest = {"format": "teaspill-backup", "version": 1, "created": "then", "files": files}
    with tarfile.open(path, "w:gz") as tar:
        raw = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(raw)
        tar.addfile(info, io.BytesIO(raw))
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.type, info.linkname, info.mode = member.kind, member.link, member.mode
            info.uid = info.gid = member.uid
            info.size = len(member.data)
            tar.addfile(info, io.BytesIO(member.data) if member.data else None)
    return path


def _folder(name: str, mode: int = 0o755) -> Member:
    return Member(name, tarfile.DIRTYPE, mode=mode)


def _link(name: str, to: str) -> Member:
    return Member(name, tarfile.SYMTYPE, link=to, mode=0o777)


def _refused(tmp_path: Path, members: list[Member], said: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    home = tmp_path / "home"
    with pytest.raises(BackupError) as refused:
        restore_backup(_archive(tmp_path / "crafted.tar.gz", members), home)
    assert said in str(refused.value)
    assert "nothing was written" in str(refused.value)
    assert list(outside.iterdir()) == []
    assert not home.exists()


def test_a_file_below_a_link_to_outside_the_home_is_refused(tmp_path: Path) -> None:
    members = [
        _folder("workspaces"),
        _link("workspaces/evil", str(tmp_path / "outside")),
        Member("workspaces/evil/planted", data=PAYLOAD, mode=0o4755),
    ]
    _refused(tmp_path, members, "'workspaces/evil' where a folder of workspaces belongs")


def test_a_file_below_a_link_inside_a_workspace_is_refused(tmp_path: Path) -> None:
    """The link itself is the workspace's own; what is below it would be written through."""
    members = [
        _folder("workspaces/acme/acme.a"),
        _link("workspaces/acme/acme.a/d", "../../../../outside"),
        Member("workspaces/acme/acme.a/d/planted", data=PAYLOAD),
    ]
    _refused(tmp_path, members, "below the link 'workspaces/acme/acme.a/d'")


@pytest.mark.parametrize(
    ("name", "to", "said"),
    [
        ("identity", "/etc", "outside its part identity"),
        ("restate/db", "/tmp", "outside its part restate"),
        ("archive/acme/acme.a.json", "../../identity/key", "outside its part archive"),
        ("workspaces/acme", "../../outside", "where a folder of workspaces belongs"),
        ("workspaces/acme/acme.a", "../bravo/bravo.b", "where a folder of workspaces belongs"),
    ],
)
def test_a_link_out_of_its_part_or_in_place_of_a_workspace_is_refused(
    tmp_path: Path, name: str, to: str, said: str
) -> None:
    _refused(tmp_path, [_link(name, to)], said)


def test_a_hard_link_a_fifo_or_a_name_held_twice_is_refused(tmp_path: Path) -> None:
    kept = Member("workspaces/acme/acme.a/notes.txt", data=PAYLOAD)
    hard = Member("workspaces/acme/acme.a/shadow", tarfile.LNKTYPE, link="/etc/shadow")
    _refused(tmp_path, [kept, hard], "which is not a file, folder or link")
    fifo = Member("workspaces/acme/acme.a/pipe", tarfile.FIFOTYPE)
    _refused(tmp_path, [kept, fifo], "which is not a file, folder or link")
    swapped = _link("workspaces/acme/acme.a/notes.txt", "/etc/shadow")
    _refused(tmp_path, [kept, swapped], "twice")


def test_a_restore_keeps_a_workspaces_links_modes_and_owners_without_special_bits(
    tmp_path: Path,
) -> None:
    """A workspace's links are its own, wherever they lead (a virtual environment links
    its python absolutely): restored as links. Files keep their owner and mode, less the
    setuid, setgid and sticky bits."""
    root = "workspaces/acme/acme.a"
    members = [
        _folder("workspaces", 0o700),
        _folder("workspaces/acme"),
        _folder(root, 0o2775),
        Member(f"{root}/tool", data=b"#!/bin/sh\n", mode=0o6755, uid=1_500_123),
        Member(f"{root}/notes.txt", data=PAYLOAD, mode=0o640, uid=1_500_123),
        _link(f"{root}/python", "/usr/bin/python3"),
        _link(f"{root}/other", "../../bravo/bravo.b"),
    ]
    home = tmp_path / "home"

    restore_backup(_archive(tmp_path / "kept.tar.gz", members), home)

    restored = home / root
    assert (restored / "python").readlink() == Path("/usr/bin/python3")
    assert (restored / "other").readlink() == Path("../../bravo/bravo.b")
    assert (restored / "notes.txt").read_bytes() == PAYLOAD
    modes = {p.name: p.stat().st_mode & 0o7777 for p in (restored / "tool", restored / "notes.txt")}
    assert modes == {"tool": 0o755, "notes.txt": 0o640}
    assert restored.stat().st_mode & 0o7777 == 0o755
    assert (home / "workspaces").stat().st_mode & 0o777 == 0o700
    if os.geteuid() == 0:
        assert (restored / "tool").stat().st_uid == 1_500_123


def test_what_is_extracted_is_the_archive_that_was_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive at the path is swapped for another once it was checked: the restore
    extracts the one it checked, from the file it opened."""
    path = tmp_path / "backup.tar.gz"
    note = "workspaces/acme/acme.a/notes.txt"
    _archive(path, [Member(note, data=b"checked\n")])
    other = _archive(tmp_path / "other.tar.gz", [Member(note, data=b"swapped\n")])
    make_folder = tempfile.mkdtemp

    def swap_then_make(*args: Any, **kwargs: Any) -> str:
        """The restore makes its staging folder once the archive is checked."""
        other.replace(path)
        return str(make_folder(*args, **kwargs))

    monkeypatch.setattr(tempfile, "mkdtemp", swap_then_make)
    home = tmp_path / "home"

    restore_backup(path, home)

    assert (home / note).read_bytes() == b"checked\n"


def _noise(size: int) -> bytes:
    """Bytes gzip cannot shrink, so the archive is larger than any read buffer."""
    blocks = (hashlib.sha256(str(n).encode()).digest() for n in range(size // 32))
    return b"".join(blocks)


def test_what_was_extracted_is_hashed_again_before_anything_is_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive's file is rewritten in place (the same file the restore holds open) once
    it was checked, with a file of the same size and other bytes: the extraction reads
    those, and the restore refuses them with a sentence and moves nothing into the home."""
    path = tmp_path / "backup.tar.gz"
    note, blob = "workspaces/acme/acme.a/notes.txt", "artifacts/blob"
    _archive(path, [Member(note, data=b"checked\n"), Member(blob, data=_noise(1 << 18))])
    other = _archive(
        tmp_path / "other.tar.gz",
        [Member(note, data=b"swapped\n"), Member(blob, data=_noise(1 << 18))],
    )
    make_folder = tempfile.mkdtemp

    def rewrite_then_make(*args: Any, **kwargs: Any) -> str:
        """The restore makes its staging folder once the archive is checked."""
        path.write_bytes(other.read_bytes())  # the same inode, truncated and written
        return str(make_folder(*args, **kwargs))

    monkeypatch.setattr(tempfile, "mkdtemp", rewrite_then_make)
    home = tmp_path / "home"

    with pytest.raises(BackupError) as refused:
        restore_backup(path, home)

    assert str(refused.value) == (
        f"{path}: {note} as extracted is not the file the manifest names (the archive "
        "changed while it was read, or the disk did not keep what was written); nothing "
        "was restored."
    )
    assert sorted(p.name for p in home.iterdir()) == []
