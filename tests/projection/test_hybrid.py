"""Hybrid ranking in both stores, with vectors made by hand: the vector list brings a row
BM25 cannot find and changes BM25's order, both lists hold only the rows within the
search's tenant and scopes (or the tenant's released passages), and the fill keeps a
vector only on a row that still holds the text it was made from."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import numpy as np

from schemas.knowledge import Document, DocumentSearch, IndexedDocument, Passage
from schemas.memory import MemoryHit, MemoryRecord, MemoryScope, MemorySearch
from services.projection.embeddings import QueryVector, unit
from services.projection.stores import ReadSide
from services.projection.vectors import Unembedded
from tests.projection.conftest import Stores

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
U = MemoryScope("acme", "user", "u1")
V = MemoryScope("acme", "user", "v1")
OTHER = MemoryScope("globex", "user", "u1")
MODEL = "hand-made"


def vector(*xs: float) -> bytes:
    return unit(np.asarray(xs, dtype="<f4"))


KETTLE = vector(0.0, 1.0, 0.1)
"""Where the query's vector points."""


def record(id_: str, scope: MemoryScope, text: str) -> MemoryRecord:
    return MemoryRecord(id_, scope, "episodic", text, AT)


RECORDS = (
    record("m1", U, "tea"),
    record("m2", U, "tea with lemon in the afternoon"),
    record("m3", U, "the kettle boils water"),
    record("m4", V, "the kettle boils water"),
    record("m5", OTHER, "the kettle boils water"),
    record("m6", U, "a bicycle with one wheel"),
)
HAND_MADE = {
    "m1": vector(1.0, 0.0, 0.0),
    "m2": vector(0.1, 1.0, 0.1),
    "m3": vector(0.0, 1.0, 0.0),
    "m4": KETTLE,
    "m5": KETTLE,
    "m6": vector(0.0, 0.0, 1.0),
}
"""m4 (another user) and m5 (another tenant) hold exactly the query's vector."""


def run(stores: Stores, work: Callable[[ReadSide], Awaitable[None]]) -> None:
    async def go() -> None:
        async with await stores.fresh() as store:
            await store.record_memories(RECORDS)
            for tenant in ("acme", "globex"):
                rows = await store.unembedded(tenant, MODEL, 100)
                await store.record_vectors(MODEL, [(r, HAND_MADE[r.key[0]]) for r in rows])
            await work(store)

    asyncio.run(go())


def ids(hits: list[MemoryHit]) -> list[str]:
    return [hit.record.id for hit in hits]


def test_the_vector_list_finds_what_bm25_cannot_within_the_scope_only(stores: Stores) -> None:
    search = MemorySearch("tea", (U,), limit=10)
    query = QueryVector(KETTLE, MODEL)

    async def work(store: ReadSide) -> None:
        assert ids(await store.search_memories(search)) == ["m1", "m2"]
        found = ids(await store.search_memories(search, query))
        # m2, second by BM25 but nearest by vector, rises above m1; m3 shares no word with
        # the query, but its vector is near.
        assert found == ["m2", "m1", "m3", "m6"]
        # The other user's and the other tenant's identical vectors are never candidates.
        assert not {"m4", "m5"} & set(found)
        assert ids(await store.search_memories(MemorySearch("tea", (U, OTHER)), query)) == []
        assert ids(await store.search_memories(MemorySearch("kettle", (V,)), query)) == ["m4"]

    run(stores, work)


def test_vectors_of_another_model_are_not_compared(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        search = MemorySearch("tea", (U,), limit=10)
        assert ids(await store.search_memories(search, QueryVector(KETTLE, "another"))) == [
            "m1",
            "m2",
        ]
        assert len(await store.unembedded("acme", "another", 100)) == 5
        assert await store.unembedded_tenants("another") == ["acme", "globex"]
        assert await store.unembedded_tenants(MODEL) == []

    run(stores, work)


def test_a_vector_is_kept_only_on_a_row_that_still_holds_its_text(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        await store.record_memories([record("m7", U, "a new note about kettles")])
        (row,) = await store.unembedded("acme", MODEL, 100)
        assert row.key == ("m7",)
        await store.forget_memories("acme", ["m7"])
        await store.record_vectors(MODEL, [(row, KETTLE)])
        stale = Unembedded("memories", "acme", ("m3",), "another text")
        await store.record_vectors("other", [(stale, KETTLE)])
        assert len(await store.unembedded("acme", "other", 100)) == 5  # m3 kept none
        found = ids(
            await store.search_memories(MemorySearch("kettle", (U,)), QueryVector(KETTLE, MODEL))
        )
        assert "m7" not in found

    run(stores, work)


DOC = Document("doc1", "acme", "Guide", "text", "0" * 64, 10, "released", AT, AT, 2)
DRAFT = Document("doc2", "acme", "Draft", "text", "1" * 64, 10, "draft", AT, None, 0)
THEIRS = Document("doc3", "globex", "Theirs", "text", "2" * 64, 10, "released", AT, AT, 1)


def test_passages_are_fused_only_among_the_tenants_released_ones(stores: Stores) -> None:
    async def go() -> None:
        async with await stores.fresh() as store:
            await store.record_document(IndexedDocument(DOC, (
                Passage(1, 0, "", "Boats moor at the east pier."),
                Passage(2, 30, "Tides", "High water comes after noon."),
            )))  # fmt: skip
            await store.record_document(IndexedDocument(DRAFT))
            await store.record_document(
                IndexedDocument(THEIRS, (Passage(1, 0, "", "High water comes after noon."),))
            )
            for tenant in ("acme", "globex"):
                rows = await store.unembedded(tenant, MODEL, 100)
                made = [(r, KETTLE if "water" in r.text else vector(1, 0, 0)) for r in rows]
                assert {r.table for r in rows} == {"passages"}
                await store.record_vectors(MODEL, made)
            search = DocumentSearch("acme", "pier tide", 5)
            bm25 = await store.search_documents(search)
            assert [(h.document, h.passage.n) for h in bm25] == [("doc1", 1)]
            hybrid = await store.search_documents(search, QueryVector(KETTLE, MODEL))
            assert [(h.document, h.passage.n) for h in hybrid] == [("doc1", 1), ("doc1", 2)]
            assert hybrid[1].passage.section == "Tides"
            theirs = DocumentSearch("globex", "nothing shared", 5)
            found = await store.search_documents(theirs, QueryVector(KETTLE, MODEL))
            assert [(h.document, h.passage.n) for h in found] == [("doc3", 1)]

    asyncio.run(go())
