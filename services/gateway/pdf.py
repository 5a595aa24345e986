"""What the gateway reads of an uploaded PDF: the text of each page (pypdf), joined with a
form feed after each page but the last, which is the document's text (`format` `pdf`).
Only that text goes on to the `Knowledge` object, so a PDF's passages, their pages and a
rebuild's are a pure function of it, as a text's are.

A file that is not a PDF, that pypdf cannot parse, that is encrypted with a password, has
more than `MAX_PDF_PAGES` pages or no text at all (a scan) is refused with a sentence.

A PDF is a program of sorts: a few kilobytes can hold one compressed page stream that
inflates to megabytes, shared by every page. So the gateway never parses one itself:
`read_pdf` runs `pdf_text` in a child process of its own (`python -m
services.gateway.pdf`, the bytes on stdin, the answer on stdout) limited in address space
(`PDF_MEMORY`) and CPU time, with none of the gateway's environment (its keys and URLs),
killed past `PDF_SECONDS` of wall time, at most
`PDF_AT_ONCE` of them at a time per gateway; and the text stops being read once it passes
`MAX_DOCUMENT_CHARS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import resource
import sys
import weakref
from pathlib import Path

import msgspec
from pypdf import PasswordType, PdfReader

from schemas.knowledge import MAX_DOCUMENT_CHARS, MAX_PDF_PAGES, PAGE_BREAK

UNREADABLE, TOO_LARGE = 422, 413
PDF_SECONDS = 30.0
"""Wall-clock seconds one PDF's reading may take."""
PDF_MEMORY = 1 << 30
"""Bytes of address space the reading process may have."""
PDF_AT_ONCE = 2
"""PDFs one gateway reads at a time; more wait their turn."""
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)
_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder `services` is imported from, for the child."""


class PdfRefusedError(Exception):
    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status
        self.sentence = sentence


def pdf_text(data: bytes) -> str:
    """The PDF's pages' text, each page's ended by a form feed but the last's."""
    if not data.lstrip()[:5] == b"%PDF-":
        raise PdfRefusedError(UNREADABLE, "The body is not a PDF: it does not start with %PDF-.")
    try:
        reader = PdfReader(io.BytesIO(data))
        _open(reader)
        count = len(reader.pages)
        if count > MAX_PDF_PAGES:
            raise PdfRefusedError(
                TOO_LARGE,
                f"A PDF is read up to {MAX_PDF_PAGES} pages; this one has {count}: split it.",
            )
        pages = _pages(reader)
    except PdfRefusedError:
        raise
    except Exception as error:  # noqa: BLE001 - a malformed file can raise anything from the parser
        reason = str(error).strip().rstrip(".") or type(error).__name__
        raise PdfRefusedError(UNREADABLE, f"The PDF cannot be read: {reason}.") from None
    text = PAGE_BREAK.join(page.strip() for page in pages)
    if not text.replace(PAGE_BREAK, "").strip():
        raise PdfRefusedError(
            UNREADABLE, "The PDF has no text to extract: a scanned PDF needs OCR first."
        )
    return text


def _pages(reader: PdfReader) -> list[str]:
    """Each page's text, until their characters pass what a document holds."""
    pages: list[str] = []
    total = 0
    for page in reader.pages:
        text = (page.extract_text() or "").replace(PAGE_BREAK, "\n")
        total += len(text)
        if total > MAX_DOCUMENT_CHARS:
            raise PdfRefusedError(
                TOO_LARGE,
                f"A document holds at most {MAX_DOCUMENT_CHARS} characters; this PDF's text"
                f" passes that by page {len(pages) + 1} of {len(reader.pages)}: split it.",
            )
        pages.append(text)
    return pages


class _Read(msgspec.Struct, omit_defaults=True):
    """What the reading process answers: the text, or a refusal's status and sentence."""

    text: str = ""
    status: int = 0
    sentence: str = ""


async def read_pdf(data: bytes, seconds: float = PDF_SECONDS) -> str:
    """`pdf_text(data)`, read in a child process within the limits above."""
    gate = _gates.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(PDF_AT_ONCE))
    async with gate:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "services.gateway.pdf",
            str(seconds),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={"PYTHONPATH": _ROOT, "PATH": os.environ.get("PATH", "")},  # no secrets
        )
        try:
            out, _ = await asyncio.wait_for(child.communicate(data), seconds)
        except TimeoutError:
            raise PdfRefusedError(
                TOO_LARGE,
                f"Reading this PDF's text took more than {seconds:g} s: split it, or upload"
                " its text.",
            ) from None
        finally:
            if child.returncode is None:  # past the time, or the request was cancelled
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
    if child.returncode != 0:
        raise PdfRefusedError(
            TOO_LARGE,
            "Reading this PDF's text needed more memory or time than a PDF is given: split"
            " it, or upload its text.",
        )
    read = msgspec.json.decode(out, type=_Read)
    if read.status:
        raise PdfRefusedError(read.status, read.sentence)
    return read.text


def _child(seconds: float) -> None:
    """The reading process: the PDF on stdin, a `_Read` on stdout."""
    resource.setrlimit(resource.RLIMIT_AS, (PDF_MEMORY, PDF_MEMORY))
    cpu = int(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    try:
        read = _Read(text=pdf_text(sys.stdin.buffer.read()))
    except PdfRefusedError as refused:
        read = _Read(status=refused.status, sentence=refused.sentence)
    sys.stdout.buffer.write(msgspec.json.encode(read))


def _open(reader: PdfReader) -> None:
    """Open an encrypted PDF that needs no password to read (an owner password only);
    refuse one that does."""
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise PdfRefusedError(
            UNREADABLE, "The PDF is encrypted with a password: upload it without one."
        )


if __name__ == "__main__":
    _child(float(sys.argv[1]))
