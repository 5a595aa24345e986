"""What the gateway reads of a PDF (pypdf), pure: each page's text, pages ended by a form
feed; a file that is not a PDF, a broken one, one encrypted with a password, one with too
many pages or no text is refused with a sentence; passages keep their pages."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.gateway.pdf import PdfRefusedError, pdf_text, read_pdf
from services.knowledge.passages import passages
from tests.fixtures.pdf import encrypted, inflating, made_pdf

GUIDE = made_pdf([
    ["Harbour guide", "Boats moor at the east pier (north side)."],
    ["Tides", "High tide comes two hours after noon."],
])  # fmt: skip


def test_each_pages_text_is_read_and_each_passage_knows_its_page() -> None:
    text = pdf_text(GUIDE)
    assert text == (
        "Harbour guide\nBoats moor at the east pier (north side).\f"
        "Tides\nHigh tide comes two hours after noon."
    )
    cut = passages(text, "pdf")
    assert [(p.n, p.page) for p in cut] == [(1, 1), (2, 2)]
    assert all(text[p.start :].startswith(p.text) for p in cut)
    assert cut[1].text == "Tides\nHigh tide comes two hours after noon."
    assert {p.page for p in passages(text, "text")} == {0}, "only a PDF's text has pages"


@pytest.mark.parametrize(
    ("pdf", "status", "sentence"),
    [
        (b"plain words", 422, "The body is not a PDF: it does not start with %PDF-."),
        (GUIDE[:200], 422, "The PDF cannot be read: "),
        (encrypted(GUIDE, "s3cret"), 422, "The PDF is encrypted with a password"),
        (made_pdf([[], []]), 422, "The PDF has no text to extract: a scanned PDF needs OCR"),
        (made_pdf([["x"]] * 2_001), 413, "A PDF is read up to 2000 pages; this one has 2001"),
    ],
)
def test_what_cannot_be_read_is_refused_with_a_sentence(
    pdf: bytes, status: int, sentence: str
) -> None:
    with pytest.raises(PdfRefusedError) as refused:
        pdf_text(pdf)
    assert refused.value.status == status
    assert refused.value.sentence.startswith(sentence)


def test_a_pdf_encrypted_without_a_user_password_is_read() -> None:
    assert pdf_text(encrypted(GUIDE, "")).startswith("Harbour guide")


def test_the_gateway_reads_a_pdf_in_a_process_of_its_own() -> None:
    assert asyncio.run(read_pdf(GUIDE)) == pdf_text(GUIDE)
    with pytest.raises(PdfRefusedError) as refused:
        asyncio.run(read_pdf(encrypted(GUIDE, "s3cret")))
    assert (refused.value.status, refused.value.sentence) == (
        422,
        "The PDF is encrypted with a password: upload it without one.",
    )


def _readers() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"services.gateway.pdf" in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            continue  # gone meanwhile
    return found


def test_a_pdf_that_takes_too_long_to_read_is_stopped_and_refused() -> None:
    slow = inflating(50, 1, moves=200_000)  # 10 KB; each page takes a second or more to read
    assert len(slow) < 12_000
    with pytest.raises(PdfRefusedError) as refused:
        asyncio.run(read_pdf(slow, seconds=1))
    assert (refused.value.status, refused.value.sentence) == (
        413,
        "Reading this PDF's text took more than 1 s: split it, or upload its text.",
    )
    assert _readers() == [], "the reading process was killed"


def test_a_pdf_whose_text_inflates_past_a_document_is_refused_at_that_page() -> None:
    big = inflating(5, 5_000)  # 2 KB; 300,000 characters a page
    with pytest.raises(PdfRefusedError) as refused:
        pdf_text(big)
    assert refused.value.status == 413
    assert refused.value.sentence == (
        "A document holds at most 1000000 characters; this PDF's text passes that by page 4"
        " of 5: split it."
    )
