"""`teaspill knowledge upload/release/list/search/delete`: a tenant's knowledge documents,
through the gateway."""

from __future__ import annotations

import argparse
from pathlib import Path

from schemas.knowledge import MAX_TITLE_CHARS, Document, DocumentFormat
from services.cli.errors import UsageError
from services.cli.table import table
from services.client import Client

HEADERS = ("ID", "STATUS", "PASSAGES", "UPLOADED", "TITLE")
MARKDOWN = (".md", ".markdown")
SHOWN_TEXT = 200


def commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = verbs.add_parser("knowledge", help="documents the tenant's agents search")
    each = group.add_subparsers(required=True, metavar="VERB")
    upload = each.add_parser(
        "upload",
        help="upload a text, Markdown or PDF file as a draft",
        description="Upload FILE as a draft document of TENANT: kept, never searched until "
        "it is released. A .md or .markdown file is Markdown (its headings start passages "
        "and name their sections); a .pdf file is a PDF (the gateway reads its pages' text, "
        "and each passage knows its page); anything else is plain text. A text the tenant "
        "has already is that document.",
    )
    upload.add_argument("tenant")
    upload.add_argument("file", type=Path)
    upload.add_argument("--title", help="the document's title (default: the file's name)")
    upload.add_argument("--release", action="store_true", help="release it at once")
    upload.set_defaults(run=lambda a, s, d: _upload(d.tenant(a.tenant), a))
    release = each.add_parser("release", help="make a draft searchable")
    release.add_argument("tenant")
    release.add_argument("document_id", metavar="ID")
    release.set_defaults(run=lambda a, s, d: _release(d.tenant(a.tenant), a.document_id))
    listing = each.add_parser("list", help="the tenant's documents, drafts too")
    listing.add_argument("tenant")
    listing.set_defaults(run=lambda a, s, d: _list(d.tenant(a.tenant), a.tenant))
    search = each.add_parser("search", help="passages of released documents, by words")
    search.add_argument("tenant")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=5, help="passages at most (default: 5)")
    search.set_defaults(run=lambda a, s, d: _search(d.tenant(a.tenant), a.query, a.limit))
    delete = each.add_parser("delete", help="delete a document for good")
    delete.add_argument("tenant")
    delete.add_argument("document_id", metavar="ID")
    delete.set_defaults(run=lambda a, s, d: _delete(d.tenant(a.tenant), a.document_id))


def read_document(path: Path, title: str | None) -> tuple[str, str, DocumentFormat]:
    """The file's title, text and format; a sentence when it cannot be read as text."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text: upload text or Markdown files.") from None
    except OSError as error:
        raise UsageError(f"Cannot read {path}: {error.strerror or error}.") from None
    format_: DocumentFormat = "markdown" if path.suffix.lower() in MARKDOWN else "text"
    return (title or path.name)[:MAX_TITLE_CHARS], text, format_


def _upload(client: Client, args: argparse.Namespace) -> None:
    if args.file.suffix.lower() == ".pdf":
        made = client.upload_pdf(
            (args.title or args.file.name)[:MAX_TITLE_CHARS], _bytes(args.file)
        )
    else:
        title, text, format_ = read_document(args.file, args.title)
        made = client.upload_document(title, text, format_)
    if args.release:
        made = client.release_document(made.id)
    print(f"{made.id}: {made.title}, {made.status}, {made.chars} characters ({made.format}).")


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise UsageError(f"Cannot read {path}: {error.strerror or error}.") from None


def _release(client: Client, document_id: str) -> None:
    made = client.release_document(document_id)
    print(f"Released {made.id}: its {made.passages} passages are searched from now on.")


def _list(client: Client, tenant: str) -> None:
    listed = client.documents()
    if not listed:
        print(f"Tenant {tenant} has no documents: `teaspill knowledge upload` adds one.")
        return
    print(table(HEADERS, [_row(document) for document in listed]))


def _search(client: Client, query: str, limit: int) -> None:
    hits = client.search_documents(query, limit)
    if not hits:
        print("No passage of a released document matches.")
    for hit in hits:
        where = f" ({hit.passage.section})" if hit.passage.section else ""
        where += f", page {hit.passage.page}" if hit.passage.page else ""
        text = " ".join(hit.passage.text.split())
        text = text if len(text) <= SHOWN_TEXT else text[: SHOWN_TEXT - 1] + "…"
        print(f"{hit.document} passage {hit.passage.n}, {hit.title}{where}:\n  {text}")


def _delete(client: Client, document_id: str) -> None:
    gone = client.delete_document(document_id)
    print(f"Deleted {gone.id} ({gone.title}): it is found no more.")


def _row(document: Document) -> tuple[str, ...]:
    uploaded = document.uploaded_at.isoformat(timespec="seconds")
    return (document.id, document.status, str(document.passages), uploaded, document.title)
