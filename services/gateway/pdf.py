"""What the gateway reads of an uploaded PDF: the text of each page (pypdf), joined with a
form feed after each page but the last, which is the document's text (`format` `pdf`).
Only that text goes on to the `Knowledge` object, so a PDF's passages, their pages and a
rebuild's are a pure function of it, as a text's are.

A file that is not a PDF, that pypdf cannot parse, that is encrypted with a password, has
more than `MAX_PDF_PAGES` pages or no text at all (a scan) is refused with a sentence.
"""

from __future__ import annotations

import io

from pypdf import PasswordType, PdfReader

from schemas.knowledge import MAX_PDF_PAGES, PAGE_BREAK

UNREADABLE, TOO_LARGE = 422, 413


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
        pages = [(page.extract_text() or "").replace(PAGE_BREAK, "\n") for page in reader.pages]
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


def _open(reader: PdfReader) -> None:
    """Open an encrypted PDF that needs no password to read (an owner password only);
    refuse one that does."""
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise PdfRefusedError(
            UNREADABLE, "The PDF is encrypted with a password: upload it without one."
        )
