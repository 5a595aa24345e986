"""`python -m bench.knowledge`: searching a tenant's knowledge documents, in this process.

Indexes N released Markdown documents of about C characters each (made up from a
vocabulary whose words are drawn with Zipf-like frequencies, a heading every few
paragraphs) into a projection file in a temporary directory, cut into passages as the
`Knowledge` object cuts them and written through `ProjectionStore.record_document` as the
`Projector` writes them; then runs Q searches of two or three words and prints p50/p95 of
the two read paths: `search_docs`'s (a read-only connection of its own per call) and the
gateway's (`GET /v1/knowledge/search`, a connection kept open). No stack.
"""

from __future__ import annotations

import argparse
import asyncio
import random  # noqa: TID251 - made-up text from a seed: a benchmark, not durable code
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench.stats import Spread, spread
from schemas.knowledge import Document, DocumentSearch, IndexedDocument
from services.knowledge.passages import passages
from services.projection.knowledge import search_now
from services.projection.store import ProjectionStore

AT = datetime(2026, 12, 1, tzinfo=UTC)
TENANT = "acme"
VOCABULARY = 20_000
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fi", "gu", "he")


def vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def make_text(
    rng: random.Random, words: Sequence[str], weights: Sequence[float], chars: int
) -> str:
    parts, size, paragraph = [], 0, 0
    while size < chars:
        if paragraph % 4 == 0:
            heading = " ".join(rng.choices(words, weights, k=3)).capitalize()
            parts.append(f"{'#' * (1 + paragraph // 4 % 2)} {heading}")
        sentence = " ".join(rng.choices(words, weights, k=rng.randint(50, 90)))
        parts.append(sentence.capitalize() + ".")
        size += len(parts[-1]) + 2
        paragraph += 1
    return "\n\n".join(parts)


def indexed(n: int, text: str) -> IndexedDocument:
    cut = passages(text, "markdown")
    document = Document(
        f"doc{n:020x}", TENANT, f"Document {n}", "markdown", f"{n:064x}", len(text),
        "released", AT, AT, len(cut),
    )  # fmt: skip
    return IndexedDocument(document, cut)


async def index(path: Path, documents: Sequence[IndexedDocument]) -> float:
    """Seconds to record every document, one write each."""
    async with await ProjectionStore.open(path) as store:
        started = time.perf_counter()
        for document in documents:
            await store.record_document(document)
        return time.perf_counter() - started


async def kept_open(path: Path, queries: Sequence[str]) -> tuple[Spread, int]:
    async with await ProjectionStore.open(path, readonly=True) as store:
        times, found = [], 0
        for query in queries:
            started = time.perf_counter()
            hits = await store.search_documents(DocumentSearch(TENANT, query))
            times.append(1000 * (time.perf_counter() - started))
            found += bool(hits)
    return spread(times), found


def own_connection(path: Path, queries: Sequence[str]) -> Spread:
    times = []
    for query in queries:
        started = time.perf_counter()
        search_now(path, DocumentSearch(TENANT, query))
        times.append(1000 * (time.perf_counter() - started))
    return spread(times)


def measure(documents: int, chars: int, queries: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    docs = [indexed(n, make_text(rng, words, weights, chars)) for n in range(documents)]
    text_mb = sum(d.document.chars for d in docs) / 1e6
    pieces = sum(len(d.passages) for d in docs)
    asked = [" ".join(rng.sample(words[100:5_000], rng.randint(2, 3))) for _ in range(queries)]
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "projection.db"
        seconds = asyncio.run(index(path, docs))
        shared, found = asyncio.run(kept_open(path, asked))
        alone = own_connection(path, asked)
        file_mb = path.stat().st_size / 1e6
    return [
        f"{documents:,} documents, {text_mb:.1f} MB of text, {pieces:,} passages;"
        f" projection file {file_mb:.1f} MB",
        f"index writes      {documents / seconds:8.1f} documents/s  {text_mb / seconds:6.2f} MB/s",
        f"search (gateway)  p50 {shared.median_ms:6.2f} ms  p95 {shared.p95_ms:6.2f} ms"
        f"  ({found} of {queries} queries found passages)",
        f"search_docs       p50 {alone.median_ms:6.2f} ms  p95 {alone.p95_ms:6.2f} ms",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge", description=__doc__)
    parser.add_argument("--documents", type=int, default=1_000)
    parser.add_argument("--chars", type=int, default=10_000, help="characters a document")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if min(args.documents, args.chars, args.queries) < 1:
        parser.error("--documents, --chars and --queries must be at least 1")
    for line in measure(args.documents, args.chars, args.queries, args.seed):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
