"""The memory index on real SQLite: BM25 search within the scopes given, never across
tenants; duplicates and deletions; no trace of a forgotten record's words in a search."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from services.projection.memories import match_expression
from services.projection.stores import ReadSide
from tests.projection.conftest import SqliteStores, Stores

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
U = MemoryScope("acme", "user", "u1")
V = MemoryScope("acme", "user", "v1")
ACME = MemoryScope("acme", "tenant")
BOT = MemoryScope("acme", "agent", "acme.bot")
OTHER = MemoryScope("globex", "user", "u1")


def record(id_: str, scope: MemoryScope, text: str) -> MemoryRecord:
    return MemoryRecord(id_, scope, "episodic", text, AT)


RECORDS = (
    record("m1", U, "U prefers short answers about tea"),
    record("m2", V, "V prefers long answers about tea and green tea"),
    record("m3", ACME, "The office closes at six; tea is in the kitchen"),
    record("m4", BOT, "The bot once helped with a tea order"),
    record("m5", OTHER, "globex user u1 loves tea tea tea"),
)


def run_with_store(stores: Stores, work: Callable[[ReadSide], Awaitable[None]]) -> None:
    async def run() -> None:
        async with await stores.fresh() as store:
            await store.record_memories(RECORDS)
            await work(store)

    asyncio.run(run())


def ids(hits: list[MemoryHit]) -> list[str]:
    return [hit.record.id for hit in hits]


def test_a_search_finds_only_what_its_scopes_hold_and_never_another_tenants(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        mine = await store.search_memories(MemorySearch("tea", (U, ACME, BOT), limit=10))
        assert sorted(ids(mine)) == ["m1", "m3", "m4"]
        assert ids(await store.search_memories(MemorySearch("tea", (V,)))) == ["m2"]
        # The same user id in another tenant is another user.
        assert ids(await store.search_memories(MemorySearch("tea", (OTHER,)))) == ["m5"]
        # Scopes of two tenants at once find nothing at all.
        assert await store.search_memories(MemorySearch("tea", (U, OTHER))) == []
        assert await store.search_memories(MemorySearch("tea", ())) == []

    run_with_store(stores, work)


def test_ranking_is_bm25_and_the_limit_applies_after_the_scope(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        await store.record_memories(
            [record(f"n{i}", V, f"green tea number {i}") for i in range(20)]
            + [record("best", V, "green tea")]
        )
        hits = await store.search_memories(MemorySearch("short answers", (U, V), limit=1))
        assert ids(hits) == ["m1"]
        # However many of V's records match, a search of U's scope finds none of them.
        assert ids(await store.search_memories(MemorySearch("green", (U,)))) == []
        # The shortest record holding both words first, then the ties in id order.
        ranked = await store.search_memories(MemorySearch("green tea", (V,), limit=3))
        assert ids(ranked) == ["best", "n0", "n1"]
        assert msgspec.json.decode(msgspec.json.encode(ranked[0])).keys() == {"record"}

    run_with_store(stores, work)


def test_a_record_indexed_twice_is_one_and_a_forgotten_one_is_never_found(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        await store.record_memories(RECORDS[:1])
        assert len(await store.memories(U)) == 1
        await store.forget_memories("globex", ["m1"])  # another tenant's delete: nothing
        assert ids(await store.search_memories(MemorySearch("short", (U,)))) == ["m1"]
        await store.forget_memories("acme", ["m1"])
        assert await store.search_memories(MemorySearch("short", (U,))) == []
        assert await store.memories(U) == []
        await store.forget_scope(V)
        assert await store.search_memories(MemorySearch("tea", (V,))) == []
        assert ids(await store.search_memories(MemorySearch("tea", (ACME,)))) == ["m3"]

    run_with_store(stores, work)


def test_query_words_are_never_read_as_operators() -> None:
    assert match_expression('tea AND "NOT" (x* OR') == '"tea" OR "not" OR "x"'
    assert match_expression("Where is the tea?") == '"tea"'
    assert match_expression("what is it") == '"what" OR "is" OR "it"'
    assert match_expression("  ?! ") == ""


def test_a_forgotten_records_words_are_nowhere_in_the_file(tmp_path: Path) -> None:
    """SQLite's file (PostgreSQL's erasure vacuums instead: `postgres.py`)."""
    marker = "zebrafinch9431"

    async def work(store: ReadSide) -> None:
        await store.record_memories([record("secret", U, f"the code word is {marker}")])
        assert marker.encode() in sqlite.path.read_bytes() + wal(sqlite.path)
        await store.forget_scope(U)

    sqlite = SqliteStores(tmp_path)
    run_with_store(sqlite, work)
    assert marker.encode() not in sqlite.path.read_bytes() + wal(sqlite.path)


def test_erasing_a_tenant_or_an_agent_erases_its_memories(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        await store.erase("acme.bot")
        assert await store.memories(BOT) == []
        assert len(await store.memories(U)) == 1
        await store.erase("acme", tenant="acme")
        assert [await store.memories(s) for s in (U, V, ACME)] == [[], [], []]
        assert len(await store.memories(OTHER)) == 1

    run_with_store(stores, work)


def wal(database: Path) -> bytes:
    path = Path(f"{database}-wal")
    return path.read_bytes() if path.exists() else b""
