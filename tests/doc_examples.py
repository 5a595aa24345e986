"""Finds every fenced block in README.md and docs/*.md, and runs what is runnable.

The rules a page follows, so that a new page is covered without a change here:
- every fence names its language; `text` is shown output, not an example;
- `sh` blocks run with bash, in order, in a sandbox of their own per page: a temporary
  `TEASPILL_HOME`, the port variables set to free ports (a user who chose other ports),
  one terminal session for the page (what a block exports, the next block has), a
  working directory that mirrors the repository's top level; a block that needs the
  stack starts it (`teaspill up --detach`), and whatever a page started is stopped after
  its last block;
- nothing is rewritten: a block (or a file it runs) takes addresses from the variables
  (`eval "$(teaspill env)"` sets `TEASPILL_GATEWAY_URL`, `TEASPILL_INGRESS_URL`,
  `TEASPILL_ADMIN_URL`) and ports it binds from `TEASPILL_*_PORT` (or `EXECUTION_PORT`,
  `NEW_PORT`, `TLS_PORT` for what a page starts by hand); a default port after a host
  fails;
- `python` blocks run as files in that directory (`# name.py` on the first line names
  the file, so the page's `sh` blocks can use it), and a module defining `TOOLS`,
  `MODELS` or `OBSERVERS` is loaded and used as the services would (tests/plugin_check.py);
  a program that a `sh` block of its page runs (`python name.py`) runs there, on the
  stack that page started, instead of alone (it is still imported alone);
- `js` blocks are programs for node, named on their first line (`// name.mjs`), and a
  `sh` block of their page must run them (`node name.mjs`); alone, they are only parsed;
- `toml` blocks are parsed; one with a `kind` is loaded as an agent spec, one with
  `cases` as an eval file;
- `json` blocks are parsed; `jsonl` blocks are parsed line by line;
- a block that cannot run says so and why, on the line before its fence:
  `<!-- not run: <why> -->`. Use it sparingly: a block marked so is not checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = frozenset({"sh", "python", "js", "toml", "json", "jsonl"})
SHOWN = frozenset({"text"})
HOSTS = r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0)"
DEFAULT_PORT = re.compile(rf"{HOSTS}:(?:8000|8080|9070|9080|9081|5122)\b")
"""A default port where an address belongs: an example that would miss a stack elsewhere."""
SKIP = re.compile(r"<!--\s*not run:\s*(?P<why>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+)(?P<info>[^`]*)$")
FILE_NAME = re.compile(r"(?:#|//)\s*(?P<name>[\w/]+\.(?:py|mjs))\s*")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """The line of the opening fence, counted from 1."""
    language: str
    text: str
    skipped: str | None
    """Why the block is not run, from its `<!-- not run: ... -->` marker; None if it runs."""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.skipped is None and self.language in RUN

    @property
    def file_name(self) -> str | None:
        """The file a `python` or `js` block is written to, from its first line."""
        first = self.text.splitlines()[0] if self.text.strip() else ""
        named = FILE_NAME.fullmatch(first)
        return named.group("name") if named else None

    def run_by_shell(self) -> bool:
        """Whether a `sh` block of the page runs this file (`python name.py`, `node name.mjs`)."""
        name = self.file_name
        if name is None:
            return False
        runner = r"(?:python3?|node)\s+" + re.escape(name) + r"(?![\w.])"
        shells = [b for b in blocks(self.page) if b.runs and b.language == "sh"]
        return any(re.search(runner, b.text) for b in shells)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        close = _closing(lines, index, opening.group("fence"))
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=opening.group("info").strip().split(" ")[0],
                text="\n".join(lines[index + 1 : close]) + "\n",
                skipped=_skip_reason(lines, index),
            )
        )
        index = close + 1
    return found


def _closing(lines: list[str], start: int, fence: str) -> int:
    for index in range(start + 1, len(lines)):
        if lines[index].strip() == fence:
            return index
    raise AssertionError(f"a fence opened on line {start + 1} is never closed")


def _skip_reason(lines: list[str], fence: int) -> str | None:
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    if before < 0:
        return None
    marker = SKIP.search(lines[before])
    return marker.group("why") if marker else None


def every_block() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]
