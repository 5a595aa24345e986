"""The `Knowledge` virtual object, keyed by the tenant: the one writer of its documents.

Each document is three state keys: its record (`d.<id>`), its text (`t.<id>`) and the
digest of that text (`h.<sha256>`, naming the document), so an upload of a text the
tenant has already is answered with that document, and no write rewrites a growing
value. One more key, `tally`, counts the documents and their characters against the
tenant's ceilings (TEASPILL_TENANT_DOCUMENTS, TEASPILL_TENANT_DOCUMENT_CHARS); a
document cut into more than `MAX_PASSAGES` passages is refused (413).

Every write is handed to the `Projector` before the answer: the record of a draft
(nothing searchable), the record and passages of a released document (searchable once
`release` answered), the removal of a deleted one. Nothing is uploaded once the tenant's
erasure has begun (410), however late a request sent before it runs.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import msgspec
import restate

from schemas.knowledge import (
    MAX_DOCUMENT_CHARS,
    MAX_PASSAGES,
    MAX_TITLE_CHARS,
    Document,
    DocumentAnswer,
    DocumentGone,
    DocumentList,
    DocumentRef,
    DocumentUpload,
    IndexedDocument,
    Passage,
)
from services.contracts import (
    DELETE_DOCUMENT,
    DOCUMENTS,
    INDEXED_DOCUMENT,
    KNOWLEDGE,
    PROJECT_DOCUMENT,
    PROJECT_DOCUMENT_GONE,
    RELEASE_DOCUMENT,
    UPLOAD_DOCUMENT,
)
from services.durable import NO_JOURNAL, call
from services.knowledge.passages import passages
from services.lifecycle.tombstone import refuse_if_erased
from services.settings import settings

RECORD, TEXT, DIGEST = "d.", "t.", "h."
"""The prefixes of a document's state keys; the rest is its id (for `h.`, its text's sha256)."""
TALLY = "tally"
TOO_LARGE, TOO_MANY = 413, 429

knowledge = restate.VirtualObject(
    KNOWLEDGE,
    description="One tenant's knowledge documents.",
    journal_retention=NO_JOURNAL,
    state_preload=False,
)
"""Its journals hold whole texts, so none is kept once an invocation finished; its state
holds every text of the tenant, so none is loaded before a handler asks for a key."""


class DocumentText(msgspec.Struct, frozen=True):
    text: str


class DocumentTally(msgspec.Struct, frozen=True):
    """The tenant's documents (drafts too) and the characters of their texts."""

    documents: int = 0
    chars: int = 0


def problem(upload: DocumentUpload) -> str:
    title = upload.title.strip()
    if not title or len(title) > MAX_TITLE_CHARS:
        return f"A document needs a title of 1 to {MAX_TITLE_CHARS} characters."
    if not upload.text.strip():
        return "A document needs some text."
    if len(upload.text) > MAX_DOCUMENT_CHARS:
        return (
            f"A document holds at most {MAX_DOCUMENT_CHARS} characters; this one has"
            f" {len(upload.text)}."
        )
    return ""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@knowledge.handler(name=UPLOAD_DOCUMENT.name)
async def upload(ctx: restate.ObjectContext, upload: DocumentUpload) -> DocumentAnswer:
    wrong = problem(upload)
    if wrong:
        return DocumentAnswer(problem=wrong)
    await refuse_if_erased(ctx, ctx.key())
    sha = digest(upload.text)
    same = await ctx.get(DIGEST + sha, type_hint=DocumentRef)
    if same is not None and (kept := await _record(ctx, same.id)) is not None:
        return DocumentAnswer(kept, duplicate=True)
    _check_passages(passages(upload.text, upload.format))
    tally = await _tally(ctx)
    _check_room(ctx.key(), tally, len(upload.text))
    at = datetime.fromtimestamp(await ctx.time(), UTC)
    document = Document(
        f"doc{ctx.uuid().hex[:20]}", ctx.key(), upload.title.strip(), upload.format, sha,
        len(upload.text), "draft", at,
    )  # fmt: skip
    ctx.set(RECORD + document.id, document)
    ctx.set(TEXT + document.id, DocumentText(upload.text))
    ctx.set(DIGEST + sha, DocumentRef(document.id))
    ctx.set(TALLY, DocumentTally(tally.documents + 1, tally.chars + document.chars))
    await call(ctx, PROJECT_DOCUMENT, IndexedDocument(document), key=ctx.key())
    return DocumentAnswer(document)


@knowledge.handler(name=RELEASE_DOCUMENT.name)
async def release(ctx: restate.ObjectContext, ref: DocumentRef) -> DocumentAnswer:
    document = await _record(ctx, ref.id)
    if document is None:
        return DocumentAnswer(found=False)
    if document.status == "released":
        return DocumentAnswer(document)
    indexed = await _indexed(ctx, document)
    _check_passages(indexed.passages)  # a draft uploaded before passages were counted
    at = datetime.fromtimestamp(await ctx.time(), UTC)
    released = msgspec.structs.replace(
        document, status="released", released_at=at, passages=len(indexed.passages)
    )
    ctx.set(RECORD + ref.id, released)
    await call(ctx, PROJECT_DOCUMENT, IndexedDocument(released, indexed.passages), key=ctx.key())
    return DocumentAnswer(released)


@knowledge.handler(name=DELETE_DOCUMENT.name)
async def delete(ctx: restate.ObjectContext, ref: DocumentRef) -> DocumentAnswer:
    document = await _record(ctx, ref.id)
    if document is None:
        return DocumentAnswer(found=False)
    tally = await _tally(ctx)
    for prefix, name in ((RECORD, ref.id), (TEXT, ref.id), (DIGEST, document.sha256)):
        ctx.clear(prefix + name)
    ctx.set(TALLY, DocumentTally(max(tally.documents - 1, 0), max(tally.chars - document.chars, 0)))
    await call(ctx, PROJECT_DOCUMENT_GONE, DocumentGone(ctx.key(), ref.id), key=ctx.key())
    return DocumentAnswer(document)


@knowledge.handler(name=DOCUMENTS.name, kind="shared")
async def documents(ctx: restate.ObjectSharedContext) -> DocumentList:
    names = sorted(name for name in await ctx.state_keys() if name.startswith(RECORD))
    found = [await ctx.get(name, type_hint=Document) for name in names]
    return DocumentList(tuple(d for d in found if d is not None))


@knowledge.handler(name=INDEXED_DOCUMENT.name, kind="shared")
async def indexed(ctx: restate.ObjectSharedContext, ref: DocumentRef) -> IndexedDocument:
    document = await _record(ctx, ref.id)
    if document is None:
        raise restate.TerminalError(f"There is no document {ref.id}.", status_code=404)
    if document.status == "draft":
        return IndexedDocument(document)
    return await _indexed(ctx, document)


def _check_passages(cut: tuple[Passage, ...]) -> None:
    if len(cut) > MAX_PASSAGES:
        raise restate.TerminalError(
            f"A document is cut into at most {MAX_PASSAGES} passages (at paragraphs and"
            f" headings); this one would make {len(cut)}: split it into smaller documents.",
            TOO_LARGE,
        )


def _check_room(tenant: str, tally: DocumentTally, chars: int) -> None:
    """Refuse (429) a document the tenant's ceilings have no room for."""
    ceilings = settings()
    if tally.documents >= ceilings.tenant_documents:
        raise restate.TerminalError(
            f"Tenant {tenant} has {tally.documents} documents, the most one tenant may keep"
            " (TEASPILL_TENANT_DOCUMENTS): delete one first.",
            TOO_MANY,
        )
    if tally.chars + chars > ceilings.tenant_document_chars:
        raise restate.TerminalError(
            f"Tenant {tenant}'s documents hold {tally.chars} characters; this one's {chars}"
            f" would pass the most one tenant may keep, {ceilings.tenant_document_chars}"
            " (TEASPILL_TENANT_DOCUMENT_CHARS): delete some first.",
            TOO_MANY,
        )


async def _tally(ctx: restate.ObjectContext) -> DocumentTally:
    """The tally kept, or, for documents uploaded before it was kept, counted from their
    records once."""
    kept = await ctx.get(TALLY, type_hint=DocumentTally)
    if kept is not None:
        return kept
    names = [name for name in await ctx.state_keys() if name.startswith(RECORD)]
    found = [await ctx.get(name, type_hint=Document) for name in names]
    return DocumentTally(len(names), sum(d.chars for d in found if d is not None))


async def _record(
    ctx: restate.ObjectContext | restate.ObjectSharedContext, id_: str
) -> Document | None:
    return await ctx.get(RECORD + id_, type_hint=Document)


async def _indexed(
    ctx: restate.ObjectContext | restate.ObjectSharedContext, document: Document
) -> IndexedDocument:
    kept = await ctx.get(TEXT + document.id, type_hint=DocumentText)
    text = kept.text if kept is not None else ""
    return IndexedDocument(document, passages(text, document.format))
