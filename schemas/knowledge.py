"""Knowledge documents: a tenant's texts, uploaded as drafts and searched once released.

A document belongs to one tenant. It is uploaded as a `draft`, which nothing searches;
`released`, its passages (the text cut at paragraphs, each with its position) are
searchable by the tenant's keys and agents. Two uploads of the same text (the same
sha256) are one document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from schemas.memory import Ranking

DocumentFormat = Literal["text", "markdown", "pdf"]
"""`pdf`: the text extracted from a PDF's pages, each page's ended by a form feed (`\\f`),
so every passage knows its page."""
TextFormat = Literal["text", "markdown"]
"""The formats a text is uploaded in (a PDF is uploaded as its file)."""
PAGE_BREAK = "\f"
MAX_PDF_PAGES = 2_000
"""Pages of a PDF whose text is extracted at most."""
DocumentStatus = Literal["draft", "released"]
MAX_DOCUMENT_CHARS = 1_000_000
"""Characters one document holds at most."""
MAX_TITLE_CHARS = 200
MAX_PASSAGES = 2_000
"""Passages one document is cut into at most (`services.knowledge.passages`)."""


class Document(msgspec.Struct, frozen=True):
    """A document's record, without its text."""

    id: str
    tenant: str
    title: str
    format: DocumentFormat
    sha256: str
    """Of the text as uploaded (UTF-8): what two uploads of the same text share."""
    chars: int
    status: DocumentStatus
    uploaded_at: datetime
    released_at: datetime | None = None
    passages: int = 0
    """How many passages the search holds of it (0 while a draft)."""


class Passage(msgspec.Struct, frozen=True):
    """One piece of a document's text, as the search holds and returns it."""

    n: int
    """Its position among the document's passages, from 1."""
    start: int
    """The character offset in the document's text where it begins."""
    section: str
    """The Markdown headings it sits under (`Setup > Ports`), empty for plain text."""
    text: str
    page: int = 0
    """The PDF's page it is on, from 1 (a passage never spans two); 0 for a text."""


class DocumentUpload(msgspec.Struct, frozen=True):
    """What `Knowledge.upload` takes: a document's title, format and text."""

    title: str
    format: DocumentFormat
    text: str


class DocumentRef(msgspec.Struct, frozen=True):
    id: str


class DocumentAnswer(msgspec.Struct, frozen=True):
    """A handler's answer: the document, or what was wrong (`problem`, a sentence);
    `found` is False for an id the tenant has no document of; `duplicate` says an upload's
    text was there already (the answer is that document)."""

    document: Document | None = None
    problem: str = ""
    found: bool = True
    duplicate: bool = False


class DocumentList(msgspec.Struct, frozen=True):
    documents: tuple[Document, ...] = ()


class IndexedDocument(msgspec.Struct, frozen=True):
    """A document as the projection keeps it: its record, and its passages once
    released (none for a draft)."""

    document: Document
    passages: tuple[Passage, ...] = ()


class DocumentGone(msgspec.Struct, frozen=True):
    tenant: str
    id: str


class DocumentSearch(msgspec.Struct, frozen=True):
    """Words to find in one tenant's released documents."""

    tenant: str
    query: str
    limit: int = 5


class PassageHit(msgspec.Struct, frozen=True):
    """A passage a search found, with the document it cites. Hits come most relevant
    first; no score is given: BM25's is computed over the index every tenant shares, so
    its value would tell of other tenants' words."""

    document: str
    title: str
    passage: Passage


class PassageList(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a search found, most relevant first."""

    passages: tuple[PassageHit, ...]
    ranking: Ranking = "bm25"
    """`hybrid` when BM25's list was fused with the nearest passages' (`schemas.memory`)."""
    note: str = ""
    """Why a search meant to be hybrid was ranked by BM25 alone, a sentence; empty otherwise."""
