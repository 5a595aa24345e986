"""The `Knowledge` virtual object, keyed by the tenant: the one writer of its documents.

Each document is three state keys: its record (`d.<id>`), its text (`t.<id>`) and the
digest of that text (`h.<sha256>`, naming the document), so an upload of a text the
tenant has already is answered with that document, and no write rewrites a growing
value. Every write is handed to the `Projector` before the answer: the record of a draft
(nothing searchable), the record and passages of a released document (searchable once
`release` answered), the removal of a deleted one.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import msgspec
import restate

from schemas.knowledge import (
    MAX_DOCUMENT_CHARS,
    MAX_TITLE_CHARS,
    Document,
    DocumentAnswer,
    DocumentGone,
    DocumentList,
    DocumentRef,
    DocumentUpload,
    IndexedDocument,
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

RECORD, TEXT, DIGEST = "d.", "t.", "h."
"""The prefixes of a document's state keys; the rest is its id (for `h.`, its text's sha256)."""

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
    sha = digest(upload.text)
    same = await ctx.get(DIGEST + sha, type_hint=DocumentRef)
    if same is not None and (kept := await _record(ctx, same.id)) is not None:
        return DocumentAnswer(kept, duplicate=True)
    at = datetime.fromtimestamp(await ctx.time(), UTC)
    document = Document(
        f"doc{ctx.uuid().hex[:20]}", ctx.key(), upload.title.strip(), upload.format, sha,
        len(upload.text), "draft", at,
    )  # fmt: skip
    ctx.set(RECORD + document.id, document)
    ctx.set(TEXT + document.id, DocumentText(upload.text))
    ctx.set(DIGEST + sha, DocumentRef(document.id))
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
    for prefix, name in ((RECORD, ref.id), (TEXT, ref.id), (DIGEST, document.sha256)):
        ctx.clear(prefix + name)
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
