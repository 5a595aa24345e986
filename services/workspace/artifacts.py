"""The content-addressed artifact store: each file's bytes under its sha256.

A file is written to a temporary name and renamed into place, so a reader never sees half
an artifact; the same content stored twice is one file. Several execution-plane replicas
may share the store (a shared volume): names never collide with different content.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from schemas.harness import Artifact
from schemas.workspace import artifact_name

CHUNK = 1 << 20


def artifact_path(store: Path, sha256: str) -> Path | None:
    """Where the artifact's bytes are, if `sha256` is a digest the store holds."""
    name = artifact_name(sha256)
    path = store / name if name is not None else None
    return path if path is not None and path.is_file() else None


def store_file(store: Path, source: Path, relative: str) -> Artifact:
    """Copy `source` into the store, hashing as it goes."""
    store.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    handle, temporary = tempfile.mkstemp(dir=store, prefix=".incoming-")
    try:
        with os.fdopen(handle, "wb") as out, source.open("rb") as given:
            while chunk := given.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
        sha = digest.hexdigest()
        target = store / f"{sha[:2]}/{sha}"
        target.parent.mkdir(exist_ok=True)
        Path(temporary).replace(target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Artifact(relative, size, sha)


def store_bytes(store: Path, content: bytes, relative: str) -> Artifact:
    """Keep `content` in the store under its sha256, as `store_file` keeps a file's."""
    store.mkdir(parents=True, exist_ok=True)
    sha = hashlib.sha256(content).hexdigest()
    target = store / f"{sha[:2]}/{sha}"
    if not target.is_file():
        target.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=store, prefix=".incoming-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(content)
            Path(temporary).replace(target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return Artifact(relative, len(content), sha)
