"""What only the PostgreSQL store does: its notices of new events, heard on another
connection when a commit holds events (and never for one rolled back); and the choice of
store by URL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from schemas.knowledge import DocumentSearch
from schemas.memory import MemoryRecord, MemoryScope, MemorySearch
from schemas.tenant import ApiKey
from services.gateway.reader import ProjectionReader, ProjectionUnavailableError
from services.projection.postgres import PostgresStore
from services.projection.projector import Projection
from services.projection.searching import search_documents, search_memories
from services.projection.store import ProjectionStore
from services.projection.stores import CHANNEL, open_store
from services.settings import ConfigError, load_settings
from tests.fixtures.postgres import SUPERUSER, Cluster, cluster
from tests.projection.test_store import EVENTS, T0, timeline


async def heard(listener: psycopg.AsyncConnection[Any], count: int) -> list[str]:
    payloads: list[str] = []
    async for notice in listener.notifies(timeout=10):
        payloads.append(notice.payload)
        if len(payloads) == count:
            break
    return payloads


def test_a_commit_tells_every_listener_each_agents_newest_seq(postgres: Cluster) -> None:
    url = postgres.database()
    later = timeline("acme.a", 4)[9:]
    bad_key = ApiKey("k", "acme", "nonsense", "h", T0)  # type: ignore[arg-type] # refused

    async def run() -> tuple[list[str], list[str]]:
        listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
        async with listener, await PostgresStore.open(url) as store:
            await listener.execute(f"listen {CHANNEL}")
            await store.record_events(EVENTS)
            first = await heard(listener, 3)
            with pytest.raises(psycopg.errors.CheckViolation):
                await store.record(events=timeline("other.c", 2), keys=(bad_key,))
            await store.record_events(later)
            return first, await heard(listener, 1)

    first, second = asyncio.run(run())
    assert first == ["acme.a 9", "acme.b 6", "other.c 3"]
    # The rolled-back batch told nobody: the next notice is the next commit's.
    assert second == [f"acme.a {later[-1].seq}"]


def test_the_url_chooses_the_store(postgres: Cluster, tmp_path: Path) -> None:
    async def run() -> tuple[type, type]:
        async with (
            await open_store("", tmp_path) as embedded,
            await open_store(postgres.database(), tmp_path) as shared,
        ):
            return type(embedded), type(shared)

    assert asyncio.run(run()) == (ProjectionStore, PostgresStore)
    assert (tmp_path / "projection.db").exists()
    with pytest.raises(ValueError, match=r"not a PostgreSQL URL: give postgresql://"):
        asyncio.run(open_store("mysql://db/x", tmp_path))


def test_a_tools_search_reads_the_store_it_is_pointed_at(postgres: Cluster) -> None:
    """A tool's step searches on a connection of its own, in its own thread."""
    url = postgres.database()
    tea = MemoryRecord("m1", MemoryScope("acme", "tenant"), "episodic", "tea at six", T0)

    async def write() -> None:
        async with await PostgresStore.open(url) as store:
            await store.record_memories([tea])

    asyncio.run(write())
    found = search_memories(url, MemorySearch("tea", (tea.scope,)))
    assert [hit.record for hit in found] == [tea]
    assert search_memories(url, MemorySearch("tea", (MemoryScope("globex", "tenant"),))) == []
    assert search_documents(url, DocumentSearch("acme", "tea")) == []


def test_a_projection_url_that_is_not_postgresql_is_refused_without_being_shown() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(projection_url="mysql://me:hunter2@db/teaspill")
    said = str(refused.value)
    assert said.startswith("TEASPILL_PROJECTION_URL is not valid: give a PostgreSQL URL")
    assert "hunter2" not in said


def test_after_the_server_restarts_the_writer_and_the_readers_connect_again(
    tmp_path: Path,
) -> None:
    """A write or a read the restart cut short fails (its invocation is retried, its
    request answered 503); the next one connects again."""
    with cluster() as server:
        url = server.database()
        first, later = timeline("acme.a", 2)[:3], timeline("acme.a", 2)[3:]

        async def run() -> list[int]:
            projection = Projection(tmp_path / "unused.db", url=url)
            reader = ProjectionReader(tmp_path / "unused.db", url=url)
            try:
                await projection.record(events=first)
                assert await reader.read(lambda store: store.agent("acme.a")) is not None
                server.restart()
                with pytest.raises(psycopg.OperationalError):
                    await projection.record(events=later)
                await projection.record(events=later)
                with pytest.raises(ProjectionUnavailableError) as cut:
                    await reader.read(lambda store: store.agent("acme.a"))
                # What failed, and nothing of the server's own message (host, user).
                said = cut.value.message
                assert said.startswith("the projection cannot be read right now (PostgreSQL")
                assert SUPERUSER not in said
                assert str(server.folder) not in said
                events = await reader.read(lambda store: store.timeline("acme.a"))
                return [event.seq for event in events]
            finally:
                await projection.close()
                await reader.close()

        assert asyncio.run(run()) == [1, 2, 3, 4, 5, 6]
    assert not (tmp_path / "unused.db").exists()


def test_a_gateway_that_cannot_connect_says_so_without_the_servers_words(
    postgres: Cluster, tmp_path: Path
) -> None:
    """libpq's message names the server's socket or host, and the user: the log has it."""

    async def run() -> str:
        reader = ProjectionReader(tmp_path / "unused.db", url=postgres.url("no_such_database"))
        try:
            with pytest.raises(ProjectionUnavailableError) as refused:
                await reader.read(lambda store: store.agent("acme.a"))
        finally:
            await reader.close()
        return refused.value.message

    said = asyncio.run(run())
    assert said == (
        "the projection cannot be read right now (PostgreSQL answered OperationalError); retry soon"
    )
