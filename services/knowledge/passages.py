"""A document's text cut into passages: pure, so the same text always gives the same
passages (a release replayed, a rebuild, another replica).

Passages end at paragraph boundaries (blank lines) and hold about `TARGET` characters; a
paragraph longer than `LONGEST` is cut at the last space before it. In Markdown, a heading
starts a new passage and names the section of those under it. A PDF's text (`pdf`) is its
pages' texts, each ended by a form feed: a passage never spans two pages, and each knows
its page. Each passage's text is the
document's own text from `start`, so a citation can point at it; a passage whose text (its
words, spacing aside) appeared earlier in the document is left out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from schemas.knowledge import PAGE_BREAK, DocumentFormat, Passage

TARGET = 1_000
"""Characters a passage gathers paragraphs up to."""
LONGEST = 1_500
"""Characters of one paragraph above which it is cut."""
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*\Z)", re.DOTALL)
MAX_HEADING = 200
"""Characters of a line that reads as a Markdown heading at most (a longer one is text)."""
_HEADING = re.compile(rf"(#{{1,6}})[ \t]+(.{{1,{MAX_HEADING}}}?)[ \t#]*$", re.MULTILINE)


@dataclass
class _Gathered:
    start: int = -1
    end: int = -1
    section: str = ""
    heading_only: bool = False
    """It holds a heading and nothing yet: what follows joins it, however long."""


@dataclass
class _Cutter:
    text: str
    markdown: bool
    headings: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    passages: list[Passage] = field(default_factory=list)
    open: _Gathered = field(default_factory=_Gathered)
    page: int = 0

    def paragraph(self, start: int, end: int) -> None:
        heading = _HEADING.match(self.text, start, end) if self.markdown else None
        if heading is not None:
            self.flush()
            level = len(heading.group(1))
            self.headings[level - 1 :] = [heading.group(2).strip()]
            self.add(start, heading.end())
            self.open.heading_only = True
            start = heading.end()
            while start < end and self.text[start].isspace():
                start += 1
        for piece_start, piece_end in _pieces(self.text, start, end):
            self.add(piece_start, piece_end)

    def add(self, start: int, end: int) -> None:
        gathered = self.open
        if gathered.start >= 0 and not gathered.heading_only and end - gathered.start > TARGET:
            self.flush()
            gathered = self.open
        if gathered.start < 0:
            gathered.start, gathered.section = start, " > ".join(self.headings)
        gathered.end, gathered.heading_only = end, False

    def flush(self) -> None:
        gathered, self.open = self.open, _Gathered()
        if gathered.start < 0:
            return
        text = self.text[gathered.start : gathered.end]
        digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()
        if digest in self.seen:
            return
        self.seen.add(digest)
        n = len(self.passages) + 1
        self.passages.append(Passage(n, gathered.start, gathered.section, text, self.page))


def passages(text: str, format_: DocumentFormat) -> tuple[Passage, ...]:
    cutter = _Cutter(text, markdown=format_ == "markdown")
    for page, start, end in _pages(text, format_):
        cutter.page = page
        for paragraph in _PARAGRAPH.finditer(text, start, end):
            cutter.paragraph(paragraph.start(), paragraph.end())
        cutter.flush()
    return tuple(cutter.passages)


def _pages(text: str, format_: DocumentFormat) -> Iterator[tuple[int, int, int]]:
    """Each page's number and where its text starts and ends: a PDF's pages end at form
    feeds (from 1); any other text is one page numbered 0."""
    if format_ != "pdf":
        yield 0, 0, len(text)
        return
    start = 0
    for page, piece in enumerate(text.split(PAGE_BREAK), start=1):
        yield page, start, start + len(piece)
        start += len(piece) + len(PAGE_BREAK)


def _pieces(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The paragraph `text[start:end]` in pieces of at most `LONGEST` characters, each cut
    after the last whitespace within reach (or at `LONGEST` when there is none)."""
    while end - start > LONGEST:
        cut = max(text.rfind(" ", start, start + TARGET), text.rfind("\n", start, start + TARGET))
        cut = cut if cut > start else start + LONGEST
        yield start, cut
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        yield start, end
