"""The store tests run on both stores: SQLite's file, and a real PostgreSQL cluster
started once for the session (`postgres`, in `tests/conftest.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.projection.postgres import PostgresStore
from services.projection.store import ProjectionStore
from services.projection.stores import ReadSide
from tests.fixtures.postgres import Cluster


class Stores:
    """Opens stores of one kind: `fresh` an empty one, `again` the last one anew."""

    kind: str

    async def fresh(self) -> ReadSide:
        raise NotImplementedError

    async def again(self) -> ReadSide:
        raise NotImplementedError


class SqliteStores(Stores):
    kind = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "p.db"
        self._made = 0

    async def fresh(self) -> ReadSide:
        self._made += 1
        self.path = self.folder / f"p{self._made}.db"
        return await ProjectionStore.open(self.path)

    async def again(self) -> ReadSide:
        return await ProjectionStore.open(self.path)


class PostgresStores(Stores):
    kind = "postgres"

    def __init__(self, server: Cluster) -> None:
        self.server = server
        self.url = ""

    async def fresh(self) -> ReadSide:
        self.url = self.server.database()
        return await PostgresStore.open(self.url)

    async def again(self) -> ReadSide:
        return await PostgresStore.open(self.url)


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "sqlite":
        yield SqliteStores(tmp_path)
        return
    server: Cluster = request.getfixturevalue("postgres")
    with server.databases():
        yield PostgresStores(server)
