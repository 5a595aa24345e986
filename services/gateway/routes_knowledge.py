"""Knowledge documents through the API: upload a draft, release it, list, search, delete.

Every route works within the key's own tenant (the `Knowledge` object and the index rows
of that tenant alone), so a key of another tenant finds, lists, releases and deletes
nothing of it, and is answered as if nothing were there.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, Field

from schemas.knowledge import (
    MAX_DOCUMENT_CHARS,
    MAX_TITLE_CHARS,
    DocumentAnswer,
    DocumentList,
    DocumentSearch,
    DocumentUpload,
    PassageList,
    TextFormat,
)
from services.gateway.auth import Principal, require
from services.gateway.errors import ApiError
from services.gateway.openapi import errors, json_of
from services.gateway.pdf import PdfRefusedError, read_pdf
from services.gateway.runtime import Runtime, runtime
from services.projection.embeddings import configured, query_vector, ranking_of

router = APIRouter(tags=["knowledge"])
Rt = Annotated[Runtime, Depends(runtime)]
Reader = Annotated[Principal, Depends(require("read"))]
Writer = Annotated[Principal, Depends(require("write"))]
DocumentId = Annotated[str, Path(pattern=r"^doc[0-9a-f]{20}$", description="From its record.")]


class DocumentIn(BaseModel):
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    text: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)
    format: TextFormat = "text"
    """`markdown`: headings start passages and name their sections."""


def _json(value: object, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status, media_type="application/json")


def _found(answer: DocumentAnswer, document_id: str) -> Response:
    if not answer.found or answer.document is None:
        raise ApiError(404, f"There is no document {document_id}.")
    return _json(answer.document)


@router.post(
    "/v1/knowledge",
    status_code=201,
    response_class=Response,
    responses={
        201: json_of("Document", "The draft made."),
        200: json_of("Document", "The tenant has this text already: that document."),
        **errors(401, 403, 410, 413, 422, 429),
    },
)
async def upload(body: DocumentIn, caller: Writer, rt: Rt) -> Response:
    """Upload a document as a draft: kept, never searched until it is released. A text
    the tenant has already (the same sha256) is that document, answered with 200. 413: it
    would be cut into more than 2,000 passages; 429: the tenant has its most documents,
    or their characters would pass its most."""
    return await _uploaded(rt, caller, DocumentUpload(body.title, body.format, body.text))


async def _uploaded(rt: Runtime, caller: Principal, upload: DocumentUpload) -> Response:
    await rt.keys.refuse_if_erased(caller.tenant)
    answer = await rt.ingress.upload_document(caller.tenant, upload)
    if answer.document is None:
        raise ApiError(422, answer.problem)
    return _json(answer.document, 200 if answer.duplicate else 201)


@router.post(
    "/v1/knowledge/pdf",
    status_code=201,
    response_class=Response,
    responses={
        201: json_of("Document", "The draft made of the PDF's text."),
        200: json_of("Document", "The tenant has this text already: that document."),
        **errors(401, 403, 413, 415, 422, 429),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/pdf": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def upload_pdf(
    request: Request,
    caller: Writer,
    rt: Rt,
    title: Annotated[str, Query(min_length=1, max_length=MAX_TITLE_CHARS)],
) -> Response:
    """Upload a PDF (its bytes as the body, `content-type: application/pdf`) as a draft
    document of format `pdf`: its pages' text, each passage on one page. 422: not a PDF,
    unreadable, encrypted with a password, or no text (a scan); 413: more than 2,000 pages
    or passages; otherwise as a text's upload."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/pdf":
        raise ApiError(415, "Send the PDF's bytes as the body, with content-type: application/pdf.")
    await rt.keys.refuse_if_erased(caller.tenant)
    try:
        text = await read_pdf(await request.body())
    except PdfRefusedError as refused:
        raise ApiError(refused.status, refused.sentence) from None
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ApiError(
            413,
            f"A document holds at most {MAX_DOCUMENT_CHARS} characters; this PDF's text has"
            f" {len(text)}: split it.",
        )
    return await _uploaded(rt, caller, DocumentUpload(title.strip(), "pdf", text))


@router.get(
    "/v1/knowledge",
    response_class=Response,
    responses={200: json_of("DocumentList", "The documents."), **errors(401, 503)},
)
async def listed(
    caller: Reader, rt: Rt, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Response:
    """The tenant's documents, drafts too, newest first, without their text."""
    found = await rt.projection.read(lambda store: store.documents(caller.tenant, limit))
    return _json(DocumentList(tuple(found)))


@router.get(
    "/v1/knowledge/search",
    response_class=Response,
    responses={200: json_of("PassageList", "The passages found."), **errors(401, 422, 503)},
)
async def search(
    caller: Reader,
    rt: Rt,
    q: Annotated[str, Query(min_length=1, max_length=1000)],
    limit: Annotated[int, Query(ge=1, le=50)] = 5,
) -> Response:
    """Passages of the tenant's released documents that match `q`'s words, most relevant
    first (BM25, or hybrid with an embeddings server: fused with the passages nearest `q`'s
    vector, of those documents too), each with its document and position."""
    within, query = (
        DocumentSearch(caller.tenant, q, limit),
        await query_vector(q, configured(rt.settings)),
    )
    hits = await rt.projection.read(lambda store: store.search_documents(within, query))
    return _json(PassageList(tuple(hits), ranking_of(query), query.note))


@router.get(
    "/v1/knowledge/{document_id}",
    response_class=Response,
    responses={200: json_of("Document", "The document."), **errors(401, 404, 503)},
)
async def one(document_id: DocumentId, caller: Reader, rt: Rt) -> Response:
    found = await rt.projection.read(lambda store: store.document(caller.tenant, document_id))
    return _found(DocumentAnswer(found, found=found is not None), document_id)


@router.post(
    "/v1/knowledge/{document_id}/release",
    response_class=Response,
    responses={
        200: json_of("Document", "The document, released."),
        **errors(401, 403, 404, 413),
    },
)
async def release(document_id: DocumentId, caller: Writer, rt: Rt) -> Response:
    """Release a draft: its passages are searchable once this answers (a released
    document is answered as it is)."""
    return _found(await rt.ingress.release_document(caller.tenant, document_id), document_id)


@router.delete(
    "/v1/knowledge/{document_id}",
    response_class=Response,
    responses={200: json_of("Document", "The document deleted."), **errors(401, 403, 404)},
)
async def delete(document_id: DocumentId, caller: Writer, rt: Rt) -> Response:
    """Delete a document: from its tenant's state and from the search, for good."""
    return _found(await rt.ingress.delete_document(caller.tenant, document_id), document_id)
