"""Backups of a whole installation: one archive of a home, and bringing it back.

What a backup holds: Restate's own data directory, or each node's of a cluster home
(`teaspill up --cluster`: `cluster/n1`…, every agent's state and timeline,
tenants, and all pending work: queued messages, turns waiting for children or parked on
approvals, schedules' timers, invocations in flight with their journals), the workspaces
and artifacts, the archived agents, the request-identity key pair, the webhooks' signing
key and the CLI's keys. Not the projection (rebuilt from Restate after a restore), logs
or run files.

Why Restate's data directory and not a logical export: only it holds the invocations in
flight (their journals), the queued and delayed sends and the awakeables as Restate left
them; a logical export through the admin API could write objects' state back but not
those. The copy is a consistent cut: restate-server is frozen (SIGSTOP) while its files
are taken, which is what a storage snapshot gives (Restate writes its log ahead with
fsync and recovers from a crash at any instant), and it is thawed at once after. A
cluster's nodes are frozen one after another in the same instant and thawed together:
the copy is what a power cut of the three would leave, from which a cluster recovers as
one node does. The
immutable RocksDB tables are hard-linked, the rest copied, so the pause is about the time
of copying the workspaces and Restate's logs, not its whole store. A watchdog thaws it
if this process dies meanwhile, or after `MOST_PAUSE`: a copy that outlasts that is torn,
and the backup fails. A stack that is not running is copied as it is.

Commands may run in the workspaces while they are copied, and the copier may read every
tenant's: each part is copied from folder descriptors, opening nothing through a link
(`services.workspace.copies`), so an entry swapped for a link mid-copy is never read
through, and no copy keeps a setuid or setgid bit.

The archive is a gzipped tar whose first member, `manifest.json`, names the format and
its version, the restate-server version, the endpoint's address, every file with its
size and sha256, and what was left out for being neither a file, a folder nor a link.
`services.lifecycle.restore` brings one back.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.lifecycle.leftovers import holding, sweep
from services.workspace.copies import FOLDER, CopyRules, copy_tree

FORMAT = "teaspill-backup"
VERSION = 1
MANIFEST = "manifest.json"
PARTS = (
    "restate", "cluster", "workspaces", "artifacts", "archive", "identity", "hooks",
    "cli-keys.json",
)  # fmt: skip
"""What of a home a backup holds (each where present)."""
SKIPPED = frozenset({"LOCK"})
"""Files of Restate's that a copy leaves out: its process's lock, made again at start."""
LINKED: dict[str, Callable[[str], bool]] = {
    "restate": lambda relative: relative.endswith(".sst"),
    "cluster": lambda relative: relative.endswith(".sst"),
    "artifacts": lambda relative: True,
    "archive": lambda relative: True,  # replaced whole (a rename), never written in place
}
"""Per part, the files (by path in it) never rewritten once written: hard-linked."""
MOST_PAUSE = 120
"""Seconds after which the watchdog thaws restate-server whatever this process does."""
RESTATE_PARTS = ("restate", "cluster")
"""The parts that are Restate's own data: a single node's, or a cluster's nodes'."""
CHUNK = 1 << 20
PARTIAL = ".teaspill-partial-"
"""The archive's name while it is written, beside the target (`.teaspill-partial-NAME`):
held while written and renamed to the target once whole; one a killed backup left is
removed by the next backup into that folder (`leftovers`)."""
STAGING = ".backup-"
"""The home's folder a backup copies into before it writes the archive: held (`leftovers`)
while the backup runs, and removed at its end, or by the next backup after a crash."""


class BackupError(Exception):
    """A backup or a restore that cannot be done; the message is a sentence."""


SHOWN_SKIPPED = 100
"""How many of the entries left out the manifest names (it counts them all)."""


@dataclass(frozen=True)
class Made:
    path: Path
    files: int
    bytes: int
    pause_seconds: float
    skipped: tuple[str, ...] = ()
    """What was left out for being neither a file, a folder nor a link (a FIFO, a socket,
    a device), or for being nested too deep (`copies.MOST_DEPTH`), by path in the home."""


def create_backup(
    home: Path, target: Path, *, pids: Sequence[int] = (), about: dict[str, Any]
) -> Made:
    """Write `home`'s backup to `target`. `pids`: the process groups of its running
    restate-servers (one, or a cluster's nodes), frozen while their files are copied
    (none: the stack is down). `about`: what the manifest records of the running
    installation (restate-server's version, the endpoint)."""
    if target.exists():
        raise BackupError(f"{target} exists already: name a new file for the backup.")
    sweep(home, STAGING, folders=True)
    sweep(target.parent, PARTIAL)
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=home))
    try:
        with holding(staging):
            made = _made(home, staging, target, tuple(pids), about)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return made


def _made(
    home: Path, staging: Path, target: Path, pids: tuple[int, ...], about: dict[str, Any]
) -> Made:
    paused, skipped = _copy_cut(home, staging, pids)
    files = _listing(staging)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "created": datetime.now(UTC).isoformat(),  # noqa: TID251 - not durable code
        "pause_seconds": round(paused, 3),
        **about,
        "files": files,
        "skipped": {"count": len(skipped), "paths": skipped[:SHOWN_SKIPPED]},
    }
    _write_archive(staging, target, manifest)
    return Made(target, len(files), sum(f["size"] for f in files), paused, tuple(skipped))


def _copy_cut(home: Path, staging: Path, pids: tuple[int, ...]) -> tuple[float, list[str]]:
    """Copy the parts; how long restate-server was paused, and what was left out."""
    skipped: list[str] = []
    with _frozen(pids) as pause:
        for part in PARTS:
            source = home / part
            if source.is_dir():
                left = _copy_part(source, staging / part, part)
                skipped.extend(f"{part}/{relative}" for relative in left)
            elif source.is_file():
                shutil.copy2(source, staging / part)
        if pause.thawed():
            raise BackupError(
                f"Copying took longer than the {MOST_PAUSE} s restate-server may be paused, "
                "so the watchdog thawed it while its files were copied and the copy is no "
                "consistent cut: no backup was written. The pause grows with the "
                "workspaces' size: put the home on a faster disk or free space in the "
                "workspaces, and try again."
            )
        return time.monotonic() - pause.started, skipped


@dataclass(frozen=True)
class _Pause:
    started: float
    """When restate-server was stopped."""
    watchdog: subprocess.Popen[bytes] | None = None
    launched: float = 0.0
    """When the watchdog was started: it cannot thaw restate-server before `MOST_PAUSE`
    seconds from then."""

    def thawed(self) -> bool:
        """Whether the watchdog may have thawed restate-server already."""
        if self.watchdog is None:
            return False
        waited = time.monotonic() - self.launched
        return self.watchdog.poll() is not None or waited >= MOST_PAUSE


@contextlib.contextmanager
def _frozen(pids: tuple[int, ...]) -> Iterator[_Pause]:
    """The restate-servers' groups stopped for the block (thawed by a watchdog after
    `MOST_PAUSE` seconds, or if this process dies first)."""
    if not pids:
        yield _Pause(time.monotonic())
        return
    launched = time.monotonic()
    groups = " ".join(f"-{pid}" for pid in pids)
    watchdog = subprocess.Popen(
        ["/bin/sh", "-c", f"sleep {MOST_PAUSE}; kill -CONT {groups}"],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stopped: list[int] = []
    try:
        for pid in pids:
            os.killpg(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield _Pause(time.monotonic(), watchdog, launched)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)
        watchdog.kill()
        watchdog.wait()


def _copy_part(source: Path, target: Path, part: str) -> list[str]:
    """Copy a part's tree (`copies.copy_tree`: no link followed, on either side, however
    a workspace changes meanwhile); what was left out, by path in the part."""
    target.mkdir(mode=0o700)
    folder = os.open(target, FOLDER)
    try:
        copied = copy_tree(source, folder, _rules(part))
    finally:
        os.close(folder)
    return copied.skipped


def _rules(part: str) -> CopyRules:
    """Owners kept; files `LINKED` says are never rewritten (RocksDB's tables, artifacts)
    are hard-linked instead of copied, and Restate's lock is left out."""
    linked = LINKED.get(part)
    if linked is None:
        return CopyRules(owner=_same_owner)
    return CopyRules(owner=_same_owner, linked=linked, left_out=SKIPPED)


def _same_owner(found: os.stat_result) -> tuple[int, int]:
    return found.st_uid, found.st_gid


def _listing(staging: Path) -> list[dict[str, Any]]:
    files = []
    for path in sorted(staging.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        files.append(
            {"path": path.relative_to(staging).as_posix(), "size": path.stat().st_size,
             "sha256": _digest(path)}
        )  # fmt: skip
    return files


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as given:
        while chunk := given.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_archive(staging: Path, target: Path, manifest: dict[str, Any]) -> None:
    """The manifest first, then every file and folder (links as links), written to a
    temporary name and renamed into place, so a half-written archive is never `target`."""
    partial = target.with_name(f"{PARTIAL}{target.name}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with (
            holding(partial),
            os.fdopen(fd, "wb") as out,
            tarfile.open(fileobj=out, mode="w:gz") as tar,
        ):
            raw = json.dumps(manifest, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode, info.mtime = len(raw), 0o600, int(time.time())  # noqa: TID251
            tar.addfile(info, io.BytesIO(raw))
            for path in sorted(staging.rglob("*")):
                tar.add(path, path.relative_to(staging).as_posix(), recursive=False)
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
