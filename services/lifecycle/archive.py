"""Where archived agents are kept while they are out of Restate: `ArchiveStore`, a small
interface (put, get, delete one agent's copy by address; delete a tenant's) that object
storage could implement, and `FolderArchive`, the default, a folder under the home.

`CatalogArchives` joins a store to the projection: keeping a copy marks the agent's catalog row
archived, dropping it after the agent came back marks it as it was (idle).
`TimelinesInArchive` is what a projection rebuild reads of the store: the agents it holds,
and each one's timeline decoded from its copy.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from schemas.address import parse_address
from schemas.events import Event
from schemas.lifecycle import AgentArchive
from services.agent.archiving import archived_events
from services.lifecycle.leftovers import sweep
from services.projection.projector import Projection


class ArchiveStore(Protocol):
    def put(self, archive: AgentArchive) -> None:
        """Keep `archive` whole (a reader sees the old copy or the new, never a part)."""

    def get(self, address: str) -> AgentArchive | None: ...

    def delete(self, address: str) -> bool:
        """Drop the agent's copy; False when there was none."""

    def delete_tenant(self, tenant: str) -> int:
        """Drop every copy of the tenant's agents; how many there were."""

    def addresses(self) -> list[str]:
        """Every agent the store holds a copy of, sorted."""

    def put_chunks(self, address: str, first: int, chunks: Sequence[bytes]) -> None:
        """Keep an agent's retired timeline chunks `first`, `first + 1`, ..., each whole."""

    def chunk(self, address: str, index: int) -> bytes | None: ...

    def delete_chunks(self, address: str) -> int:
        """Drop the agent's retired chunks (an erasure); how many there were."""


STAGED = ".put-"
"""How a file being written aside is named until it is renamed into place."""


class FolderArchive:
    """One JSON file per agent, `ROOT/TENANT/ADDRESS.json`, and one per retired timeline
    chunk, `ROOT/TENANT/ADDRESS.timeline/N.json`, written 0600 in 0700 folders and put in
    place by a rename. A file a crash left half-written aside (`.put-*`) is removed by the
    next write into its folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._swept: set[Path] = set()

    def put(self, archive: AgentArchive) -> None:
        path = self._path(archive.address)
        self._sweep(path.parent)
        _write(path, msgspec.json.encode(archive))

    def put_chunks(self, address: str, first: int, chunks: Sequence[bytes]) -> None:
        folder = self._chunks(address)
        self._sweep(folder)
        for index, raw in enumerate(chunks, start=first):
            _write(folder / f"{index}.json", raw)
        _sync(folder)

    def chunk(self, address: str, index: int) -> bytes | None:
        try:
            return (self._chunks(address) / f"{index}.json").read_bytes()
        except FileNotFoundError:
            return None

    def delete_chunks(self, address: str) -> int:
        folder = self._chunks(address)
        count = len(list(folder.glob("*.json"))) if folder.is_dir() else 0
        shutil.rmtree(folder, ignore_errors=True)
        return count

    def get(self, address: str) -> AgentArchive | None:
        try:
            raw = self._path(address).read_bytes()
        except FileNotFoundError:
            return None
        return msgspec.json.decode(raw, type=AgentArchive)

    def delete(self, address: str) -> bool:
        try:
            self._path(address).unlink()
        except FileNotFoundError:
            return False
        return True

    def delete_tenant(self, tenant: str) -> int:
        folder = self.root / parse_address(f"{tenant}.x").tenant
        count = len(list(folder.glob("*.json"))) if folder.is_dir() else 0
        shutil.rmtree(folder, ignore_errors=True)
        return count

    def addresses(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(path.stem for path in self.root.glob("*/*.json"))

    def _sweep(self, folder: Path) -> None:
        """The first write into a folder (since this process started) first removes what a
        crash left there mid-write (`leftovers`)."""
        if folder not in self._swept:
            sweep(folder, STAGED)
            self._swept.add(folder)

    def _path(self, address: str) -> Path:
        parsed = parse_address(address)  # its segments hold no `/` nor a leading `.`
        return self.root / parsed.tenant / f"{parsed}.json"

    def _chunks(self, address: str) -> Path:
        parsed = parse_address(address)
        return self.root / parsed.tenant / f"{parsed}.timeline"


def _write(path: Path, raw: bytes) -> None:
    """`raw` at `path` whole (written aside, synced, renamed), its folder made 0700."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=STAGED)
    try:
        with os.fdopen(fd, "wb") as out:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX)  # held until it is renamed
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
            Path(staged).replace(path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


def _sync(folder: Path) -> None:
    """The folder's entries (the renames) on disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CatalogArchives:
    """The agents' side of archiving (`services.agent.archiving.Archives`): the store and
    the catalog's mark together."""

    def __init__(self, store: ArchiveStore, projection: Projection) -> None:
        self.store = store
        self._projection = projection

    async def keep(self, archive: AgentArchive) -> None:
        self.store.put(archive)
        await self._projection.mark_archived(archive.address, archived=True)

    async def find(self, address: str) -> AgentArchive | None:
        return self.store.get(address)

    async def restored(self, address: str) -> None:
        await self._projection.mark_archived(address, archived=False)
        self.store.delete(address)

    async def retire(self, address: str, first: int, chunks: Sequence[bytes]) -> None:
        await asyncio.to_thread(self.store.put_chunks, address, first, chunks)

    async def retired(self, address: str, index: int) -> bytes | None:
        return self.store.chunk(address, index)


class TimelinesInArchive:
    """A projection rebuild's reads of the store (`services.projection.rebuild`)."""

    def __init__(self, store: ArchiveStore) -> None:
        self.store = store

    def addresses(self) -> list[str]:
        return self.store.addresses()

    async def events(self, address: str) -> Sequence[Event]:
        copy = self.store.get(address)
        if copy is None:
            return ()
        return await archived_events(copy, lambda index: self.store.chunk(address, index))
