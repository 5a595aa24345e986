"""What a crash leaves behind is removed by the next run of the same operation, and what a
live process is still writing is not: a writer process SIGKILLed while its archived copy
was staged (`archive/TENANT/.put-*`), a backup SIGKILLed while it copied
(`HOME/.backup-*`), and one SIGKILLed while it wrote its archive (`.teaspill-partial-NAME`
beside the target), each beside one of the same kind still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from schemas.lifecycle import AgentArchive
from services.lifecycle.archive import FolderArchive
from services.lifecycle.backup import create_backup
from services.lifecycle.leftovers import STALE_AFTER

ROOT = Path(__file__).resolve().parents[1]
AT = datetime(2026, 12, 1, tzinfo=UTC)
STUCK_WRITE = """
import os, sys
from pathlib import Path
from services.lifecycle import archive
def stuck(fd):
    print("staged", flush=True)
    sys.stdin.read()
archive.os.fsync = stuck
archive._write(Path(sys.argv[1]), b"half of a copy")
"""
STUCK_BACKUP = """
import sys
from pathlib import Path
from services.lifecycle import backup
def stuck(home, staging, pid):
    print(staging, flush=True)
    sys.stdin.read()
backup._copy_cut = stuck
backup.create_backup(Path(sys.argv[1]), Path(sys.argv[2]), about={})
"""

STUCK_ARCHIVE = """
import sys, tarfile
from pathlib import Path
from services.lifecycle import backup
def stuck(self, *args, **kwargs):
    print("writing", flush=True)
    sys.stdin.read()
tarfile.TarFile.addfile = stuck
backup.create_backup(Path(sys.argv[1]), Path(sys.argv[2]), about={})
"""


@contextmanager
def stuck(code: str, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A process running `code` until it has staged its work (the line it prints)."""
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    with process:
        try:
            assert process.stdout is not None
            yield process, process.stdout.readline().strip()
        finally:
            process.kill()


def _aged(path: Path) -> None:
    """As if it had been left there longer than `STALE_AFTER`."""
    then = path.lstat().st_mtime - STALE_AFTER - 5
    os.utime(path, (then, then), follow_symlinks=False)


def test_a_copy_left_half_written_by_a_killed_writer_goes_and_a_live_one_stays(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "archive" / "acme"
    with (
        stuck(STUCK_WRITE, str(folder / "acme.dead.json")) as (dead, _),
        stuck(STUCK_WRITE, str(folder / "acme.live.json")) as (live, _),
    ):
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        left = sorted(folder.glob(".put-*"))
        assert len(left) == 2
        for staged in left:
            _aged(staged)
        fresh = folder / ".put-fresh"  # made a moment ago, not locked yet
        fresh.write_bytes(b"")

        FolderArchive(tmp_path / "archive").put(AgentArchive("acme.x", AT))

        kept = sorted(folder.glob(".put-*"))
        assert len(kept) == 2
        assert fresh in kept
        assert live.poll() is None
        assert (folder / "acme.x.json").is_file()
        assert not (folder / "acme.dead.json").exists()


def test_a_killed_backups_staging_goes_at_the_next_backup_and_a_running_ones_stays(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "hooks" / "key").write_bytes(b"secret")
    with (
        stuck(STUCK_BACKUP, str(home), str(tmp_path / "dead.tgz")) as (dead, dead_staging),
        stuck(STUCK_BACKUP, str(home), str(tmp_path / "live.tgz")) as (live, live_staging),
    ):
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert {p.name for p in home.glob(".backup-*")} == {
            Path(dead_staging).name,
            Path(live_staging).name,
        }
        for staging in home.glob(".backup-*"):
            _aged(staging)
        plain = home / ".backup-notes.txt"  # a file of that name is no staging folder
        plain.write_text("mine")
        _aged(plain)

        made = create_backup(home, tmp_path / "next.tgz", about={})

        assert made.files == 1
        assert {p.name for p in home.glob(".backup-*")} == {Path(live_staging).name, plain.name}
        assert live.poll() is None


def test_a_killed_backups_half_archive_goes_at_the_next_backup_and_a_running_ones_stays(
    tmp_path: Path,
) -> None:
    home, backups = tmp_path / "home", tmp_path / "backups"
    (home / "hooks").mkdir(parents=True)
    (home / "hooks" / "key").write_bytes(b"secret")
    backups.mkdir()
    with (
        stuck(STUCK_ARCHIVE, str(home), str(backups / "dead.tgz")) as (dead, _),
        stuck(STUCK_ARCHIVE, str(home), str(backups / "live.tgz")) as (live, _),
    ):
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        names = {".teaspill-partial-dead.tgz", ".teaspill-partial-live.tgz"}
        assert {p.name for p in backups.iterdir()} == names
        for partial in backups.iterdir():
            _aged(partial)
        mine = backups / ".dead.tgz.partial"  # not a name a backup writes
        mine.write_text("mine")
        _aged(mine)

        made = create_backup(home, backups / "next.tgz", about={})

        assert made.files == 1
        assert {p.name for p in backups.iterdir()} == {
            ".teaspill-partial-live.tgz",
            mine.name,
            "next.tgz",
        }
        assert live.poll() is None
