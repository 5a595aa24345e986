"""Bringing a backup back (`services.lifecycle.backup` says what one holds).

A restore reads the whole archive and checks all of it before it writes anything: every
file against the manifest's size and sha256, every name a path of a home's part, nothing
but files, folders and links, no link that leads out of its part or stands for a tenant's
or a workspace's folder, nothing below a link. A corrupt, truncated, foreign or crafted
archive is refused with a sentence, and nothing is written. It is then extracted from the
same open file, with no setuid, setgid or sticky bit and owners kept, into a folder of the
home; every file extracted is hashed again against the manifest before any part is moved
into place (a difference is refused, and nothing is restored).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from services.lifecycle.backup import (
    CHUNK,
    FORMAT,
    MANIFEST,
    PARTS,
    RESTATE_PARTS,
    VERSION,
    BackupError,
)
from services.lifecycle.leftovers import holding, sweep
from services.stack.restored import RESTORED

STAGING = ".restore-"
"""The home's folder a restore extracts into, held while it runs (`leftovers`)."""
WORKSPACE_DEPTH = 3
"""`workspaces/TENANT/ADDRESS`: what is deeper is a workspace's own."""


def read_manifest(archive: Path) -> dict[str, Any]:
    """The manifest of a backup whose every file is as the manifest says; else a
    `BackupError` sentence. Reads the whole archive and writes nothing."""
    with _opened(archive) as tar:
        return _read_checked(archive, tar)


@contextlib.contextmanager
def _opened(archive: Path) -> Iterator[tarfile.TarFile]:
    """The archive, opened once: what is checked is what is extracted, whatever is put at
    its path meanwhile."""
    try:
        raw = archive.open("rb")
    except OSError as error:
        raise BackupError(_refused(archive, error)) from error
    with raw:
        try:
            tar = tarfile.open(fileobj=raw, mode="r:gz")  # noqa: SIM115 - closed just below
        except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError) as error:
            raise BackupError(_refused(archive, error)) from error
        with tar:
            yield tar


def _read_checked(archive: Path, tar: tarfile.TarFile) -> dict[str, Any]:
    try:
        return _checked(tar)
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError) as error:
        raise BackupError(_refused(archive, error)) from error


def _refused(archive: Path, error: BaseException) -> str:
    return f"{archive} is not a whole teaspill backup ({_why(error)}); nothing was written."


def _checked(tar: tarfile.TarFile) -> dict[str, Any]:
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile():
        raise ValueError("it does not begin with a teaspill manifest")
    manifest = _manifest(tar.extractfile(first))
    expected = {f["path"]: f for f in manifest["files"]}
    seen: set[str] = set()
    names: set[str] = set()
    links: set[str] = set()
    for member in tar:
        if member is first:
            continue
        name = _safe(member)
        if name in names:
            raise ValueError(f"it holds {member.name!r} twice")
        names.add(name)
        if member.issym():
            links.add(name)
        if member.isfile():
            wanted = expected.get(member.name)
            if wanted is None or _member_digest(tar, member) != wanted["sha256"]:
                raise ValueError(f"{member.name} is not the file the manifest names")
            seen.add(member.name)
    if missing := sorted(set(expected) - seen):
        raise ValueError(f"{len(missing)} files the manifest names are missing, {missing[0]} first")
    _nothing_under_links(names, links)
    return manifest


def _manifest(raw: IO[bytes] | None) -> dict[str, Any]:
    manifest = json.loads(raw.read()) if raw is not None else None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError("its manifest is not a teaspill backup's")
    if manifest.get("version") != VERSION:
        raise ValueError(
            f"it is a version {manifest.get('version')} backup; this teaspill reads "
            f"version {VERSION}"
        )
    return manifest


def _safe(member: tarfile.TarInfo) -> str:
    """The member's path, if it is a file, folder or link of a home's part whose
    extraction writes nowhere else; else a ValueError sentence."""
    path = PurePosixPath(member.name)
    parts = path.parts
    if member.name.startswith("/") or ".." in parts or not parts or parts[0] not in PARTS:
        raise ValueError(f"it holds {member.name!r}, which is not a path of a home")
    if not (member.isfile() or member.isdir() or member.issym()):
        raise ValueError(f"it holds {member.name!r}, which is not a file, folder or link")
    if member.issym():
        _safe_link(member, parts)
    return path.as_posix()


def _safe_link(member: tarfile.TarInfo, parts: tuple[str, ...]) -> None:
    """A link inside a workspace is the tenant's own (a command may link anywhere, as a
    virtual environment links its python): it is restored as a link, which nothing outside
    the workspace's sandbox follows. Anywhere else, a link must lead inside its part, and
    none stands for a tenant's or a workspace's folder."""
    if parts[0] == "workspaces" and len(parts) > WORKSPACE_DEPTH:
        return
    if parts[0] == "workspaces":
        raise ValueError(f"it holds a link {member.name!r} where a folder of workspaces belongs")
    target = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
    if member.linkname.startswith("/") or target.split("/")[0] != parts[0]:
        raise ValueError(
            f"it holds a link {member.name!r} to {member.linkname!r}, outside its part {parts[0]}"
        )


def _nothing_under_links(names: set[str], links: set[str]) -> None:
    """Extracting a member below a link would write wherever the link leads."""
    for name in sorted(names):
        through = [str(p) for p in PurePosixPath(name).parents if str(p) in links]
        if through:
            raise ValueError(f"it holds {name!r} below the link {through[-1]!r}")


def _restorable(member: tarfile.TarInfo, staging: str) -> tarfile.TarInfo:
    """tarfile's `tar` filter (no setuid, setgid or sticky bit, no write for group or
    others, nothing outside the staging folder; owners kept, which `data` would drop and a
    workspace's uid needs), and no FIFO or device."""
    if not (member.isfile() or member.isdir() or member.issym()):
        raise tarfile.SpecialFileError(member)
    return tarfile.tar_filter(member, staging)


def _member_digest(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    digest = hashlib.sha256()
    given = tar.extractfile(member)
    assert given is not None
    while chunk := given.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def _as_recorded(archive: Path, staging: Path, manifest: dict[str, Any]) -> None:
    """Every file the manifest names, as extracted, is a file of its size and sha256 (read
    without following a link), and the extraction made no other: the check read the
    archive once and the extraction read it again, so what reached the disk is hashed
    again before anything is moved into the home."""
    expected = {f["path"]: f for f in manifest["files"]}
    for path in sorted(staging.rglob("*")):
        relative = path.relative_to(staging).as_posix()
        if path.is_symlink() or not path.is_file():
            if relative in expected:
                raise BackupError(_unlike(archive, relative, "is no file"))
            continue
        wanted = expected.pop(relative, None)
        if wanted is None:
            raise BackupError(_unlike(archive, relative, "is a file the manifest does not name"))
        if _digest_at(path) != (wanted["size"], wanted["sha256"]):
            raise BackupError(_unlike(archive, relative, "is not the file the manifest names"))
    if expected:
        raise BackupError(_unlike(archive, min(expected), "is missing"))


def _unlike(archive: Path, relative: str, what: str) -> str:
    return (
        f"{archive}: {relative} as extracted {what} (the archive changed while it was read, "
        "or the disk did not keep what was written); nothing was restored."
    )


def _digest_at(path: Path) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as given:
        while chunk := given.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _why(error: BaseException) -> str:
    if isinstance(error, EOFError | zlib.error) or "unexpected end" in str(error):
        return "it is truncated or damaged"
    return str(error) or type(error).__name__


def restore_backup(archive: Path, home: Path) -> dict[str, Any]:
    """Bring `archive` back into `home`, which must hold no installation; checked whole
    first, then extracted from the same open file. Leaves `restored.json` for the next
    start (`services.stack.restored`)."""
    for part in RESTATE_PARTS:
        if (home / part).is_dir() and any((home / part).iterdir()):
            raise BackupError(
                f"{home} holds an installation already (its {part} folder is not empty): "
                "restore into a fresh home (TEASPILL_HOME)."
            )
    with _opened(archive) as tar:
        manifest = _read_checked(archive, tar)
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        sweep(home, STAGING, folders=True)
        staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=home))
        try:
            with holding(staging):
                members = [m for m in tar.getmembers() if m.name != MANIFEST]
                tar.extractall(staging, members, numeric_owner=True, filter=_restorable)  # noqa: S202 - _checked, _restorable
                _as_recorded(archive, staging, manifest)
                for part in PARTS:
                    if (staging / part).exists():
                        shutil.rmtree(home / part, ignore_errors=True)
                        (staging / part).replace(home / part)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    moved = {"endpoint_uris": manifest.get("endpoint_uris", []), "from": manifest["created"]}
    (home / RESTORED).write_text(json.dumps(moved))
    return manifest
