"""Knowledge documents, pure and on real SQLite: passages and their positions; the index
finds released passages of one tenant only, never a draft's; a late write never takes a
released document back to a draft; a deleted document leaves no word in the file."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from schemas.knowledge import Document, DocumentSearch, IndexedDocument, PassageHit
from services.knowledge.passages import LONGEST, MAX_HEADING, TARGET, passages
from services.projection.stores import ReadSide
from tests.projection.conftest import SqliteStores, Stores

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MANUAL = """# Setup

Install the package.

## Ports
Ingress listens on its port.

Admin listens on another.

# Footer

Install the package.
"""


def test_markdown_passages_start_at_headings_name_their_section_and_point_into_the_text() -> None:
    cut = passages(MANUAL, "markdown")
    assert [(p.n, p.section) for p in cut] == [(1, "Setup"), (2, "Setup > Ports"), (3, "Footer")]
    for passage in cut:
        assert MANUAL[passage.start : passage.start + len(passage.text)] == passage.text
    assert cut[1].text == "## Ports\nIngress listens on its port.\n\nAdmin listens on another."


def test_plain_text_has_no_sections_and_a_repeated_passage_is_kept_once() -> None:
    text = "A first paragraph.\n\n# not a heading in plain text\n\n" + "x " * 600
    cut = passages(text + "\n\n" + text, "text")
    assert {p.section for p in cut} == {""}
    assert len(cut) == len(passages(text, "text")), "the second copy adds nothing"
    assert passages("  \n\n ", "text") == ()


@given(st.text(alphabet=st.sampled_from("ab #\n."), max_size=4_000))
def test_every_passage_is_the_documents_own_text_and_none_is_too_long(text: str) -> None:
    cut = passages(text, "markdown")
    assert [p.n for p in cut] == list(range(1, len(cut) + 1))
    for passage in cut:
        assert passage.text
        assert text[passage.start :].startswith(passage.text)
        assert len(" ".join(passage.text.split())) <= MAX_HEADING + TARGET + LONGEST


def document(id_: str, tenant: str, text: str, *, released: bool) -> IndexedDocument:
    draft = Document(id_, tenant, f"Title {id_}", "markdown", id_, len(text), "draft", AT)
    if not released:
        return IndexedDocument(draft)
    cut = passages(text, "markdown")
    done = msgspec.structs.replace(draft, status="released", released_at=AT, passages=len(cut))
    return IndexedDocument(done, cut)


def run_with_store(stores: Stores, work: Callable[[ReadSide], Awaitable[None]]) -> None:
    async def run() -> None:
        async with await stores.fresh() as store:
            for indexed in (
                document("doc1", "acme", MANUAL, released=True),
                document("doc2", "acme", "Ports of a draft.", released=False),
                document("doc3", "globex", "Ports of globex.", released=True),
            ):
                await store.record_document(indexed)
            await work(store)

    asyncio.run(run())


def cited(hits: list[PassageHit]) -> list[tuple[str, int]]:
    return [(hit.document, hit.passage.n) for hit in hits]


def test_only_released_passages_of_the_tenant_are_found(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        assert cited(await store.search_documents(DocumentSearch("acme", "ports"))) == [("doc1", 2)]
        assert cited(await store.search_documents(DocumentSearch("globex", "ports"))) == [
            ("doc3", 1)
        ]
        assert await store.search_documents(DocumentSearch("initech", "ports")) == []
        assert await store.search_documents(DocumentSearch("acme", "the and")) != []
        assert await store.search_documents(DocumentSearch("acme", '" OR *')) == []
        assert [d.id for d in await store.documents("acme")] == ["doc1", "doc2"]
        assert await store.document("globex", "doc1") is None

    run_with_store(stores, work)


def test_recording_again_changes_nothing_and_a_late_draft_never_unreleases(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        before = cited(await store.search_documents(DocumentSearch("acme", "install ports")))
        await store.record_document(document("doc1", "acme", MANUAL, released=True))
        await store.record_document(document("doc1", "acme", MANUAL, released=False))
        after = cited(await store.search_documents(DocumentSearch("acme", "install ports")))
        assert after == before
        kept = await store.document("acme", "doc1")
        assert kept is not None
        assert kept.status == "released"

    run_with_store(stores, work)


def test_a_deleted_document_leaves_no_word_in_the_file(tmp_path: Path) -> None:
    """SQLite's file (PostgreSQL's erasure vacuums instead: `postgres.py`)."""
    marker = "quokka-umber-2207"

    async def work(store: ReadSide) -> None:
        await store.record_document(document("doc9", "acme", f"The {marker} fact.", released=True))
        assert await store.search_documents(DocumentSearch("acme", marker))
        await store.forget_document("globex", "doc9")  # another tenant's delete: nothing
        assert await store.search_documents(DocumentSearch("acme", marker))
        await store.forget_document("acme", "doc9")
        assert await store.search_documents(DocumentSearch("acme", marker)) == []
        assert await store.document("acme", "doc9") is None

    sqlite = SqliteStores(tmp_path)
    run_with_store(sqlite, work)
    assert marker.encode() not in sqlite.path.read_bytes()


def test_a_pdfs_passages_keep_their_pages_in_the_index(stores: Stores) -> None:
    text = "Boats moor at the east pier.\fHigh tide at the pier comes after noon."
    cut = passages(text, "pdf")
    pdf = Document("doc9", "acme", "Guide", "pdf", "9" * 64, len(text), "released", AT, AT, 2)

    async def go() -> None:
        async with await stores.fresh() as store:
            await store.record_document(IndexedDocument(pdf, cut))
            hits = await store.search_documents(DocumentSearch("acme", "pier", 5))
            assert sorted((h.passage.n, h.passage.page) for h in hits) == [(1, 1), (2, 2)]
            assert (await store.document("acme", "doc9")) == pdf

    asyncio.run(go())
