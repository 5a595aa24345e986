"""`python -m bench.memory`: searching memory records, in this process.

Writes N memory records of one tenant into a projection file in a temporary directory
(one sentence each, from the same made-up Zipf-like vocabulary as `bench.knowledge`),
spread over the tenant-wide scope, 100 users and 100 agents, and as many records of a
second tenant beside them, through `ProjectionStore.record_memories` in batches of 100
as the `Projector` writes them. Then it runs Q searches of two or three words as one
agent's turn makes them (its own scope, its user's and the tenant's: filtered before
ranking) and prints p50/p95 of the two read paths: `search_memory`'s (a read-only
connection of its own per call) and the gateway's (`GET /v1/memory?q=`, a connection
kept open). No stack.

With `--hybrid`, every record also gets a vector (random, unit length, of SmolLM2's width:
what an embeddings server's would cost to store and compare, not what it would rank), and
the searches are made hybrid with a random query vector: BM25's list fused with the nearest
vectors, found by brute force over those within the scopes. Once for a turn's scopes, and
once for a third tenant's one scope holding N records (all of them compared). The query vector's own
request to the embeddings server is not timed (it is the server's cost).
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

import numpy as np

from bench.knowledge import vocabulary
from bench.stats import Spread, spread
from schemas.memory import MemoryKind, MemoryRecord, MemoryScope, MemorySearch
from services.projection.embeddings import QueryVector, unit
from services.projection.memories import search_now
from services.projection.store import ProjectionStore

AT = datetime(2026, 12, 1, tzinfo=UTC)
TENANTS = ("acme", "bravo")
OWNERS = 100
"""Users, and agents, of each tenant the records are spread over."""
BATCH = 100
WIDTH = 576
"""SmolLM2's vectors' width."""
MODEL = "bench"


def scope_of(tenant: str, n: int) -> MemoryScope:
    """Record n's scope: every third the tenant's, then a user's, then an agent's."""
    owner = n // 3 % OWNERS
    match n % 3:
        case 0:
            return MemoryScope(tenant, "tenant")
        case 1:
            return MemoryScope(tenant, "user", f"user-{owner}")
        case _:
            return MemoryScope(tenant, "agent", f"{tenant}.agent-{owner}")


def make_records(
    rng: random.Random, words: Sequence[str], weights: Sequence[float], count: int
) -> list[MemoryRecord]:
    records = []
    for tenant in TENANTS:
        for n in range(count):
            text = " ".join(rng.choices(words, weights, k=rng.randint(8, 25))).capitalize()
            kind: MemoryKind = "semantic" if n % 2 else "episodic"
            records.append(MemoryRecord(f"{tenant}-{n:012x}", scope_of(tenant, n), kind, text, AT))
    return records


async def write(path: Path, records: Sequence[MemoryRecord]) -> float:
    """Seconds to record every record, a batch per write."""
    async with await ProjectionStore.open(path) as store:
        started = time.perf_counter()
        for first in range(0, len(records), BATCH):
            await store.record_memories(records[first : first + BATCH])
        return time.perf_counter() - started


def turn_scopes(rng: random.Random) -> tuple[MemoryScope, ...]:
    """What one turn of acme's may see: its agent's scope, its user's, the tenant's."""
    owner = rng.randrange(OWNERS)
    return (
        MemoryScope("acme", "agent", f"acme.agent-{owner}"),
        MemoryScope("acme", "user", f"user-{owner}"),
        MemoryScope("acme", "tenant"),
    )


async def give_vectors(path: Path, seed: int) -> None:
    """A random unit vector for every record."""
    rng = np.random.default_rng(seed)
    async with await ProjectionStore.open(path) as store:
        for tenant in (*TENANTS, SOLO.tenant):
            while rows := await store.unembedded(tenant, MODEL, 1_000):
                made = [unit(rng.standard_normal(WIDTH).astype("<f4")) for _ in rows]
                await store.record_vectors(MODEL, list(zip(rows, made, strict=True)))


SOLO = MemoryScope("solo", "tenant")
"""With `--hybrid`, a third tenant whose records are all in its one scope: every one of them
is compared with the query's vector."""


def solo_records(
    rng: random.Random, words: Sequence[str], weights: Sequence[float], count: int
) -> list[MemoryRecord]:
    return [
        MemoryRecord(f"solo-{n:012x}", SOLO, "episodic",
                     " ".join(rng.choices(words, weights, k=rng.randint(8, 25))), AT)
        for n in range(count)
    ]  # fmt: skip


def query_vector(rng: random.Random) -> QueryVector:
    values = np.asarray([rng.gauss(0, 1) for _ in range(WIDTH)], dtype="<f4")
    return QueryVector(unit(values), MODEL)


async def kept_open(
    path: Path, searches: Sequence[MemorySearch], query: QueryVector | None = None
) -> tuple[Spread, int]:
    async with await ProjectionStore.open(path, readonly=True) as store:
        times, found = [], 0
        for search in searches:
            started = time.perf_counter()
            hits = await store.search_memories(search, query)
            times.append(1000 * (time.perf_counter() - started))
            found += bool(hits)
            assert all(h.record.scope in search.scopes for h in hits), "a hit out of scope"
    return spread(times), found


def own_connection(
    path: Path, searches: Sequence[MemorySearch], query: QueryVector | None = None
) -> Spread:
    times = []
    for search in searches:
        started = time.perf_counter()
        search_now(path, search, query)
        times.append(1000 * (time.perf_counter() - started))
    return spread(times)


def measure(count: int, queries: int, seed: int, *, hybrid: bool = False) -> list[str]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    records = make_records(rng, words, weights, count)
    searches = [
        MemorySearch(" ".join(rng.sample(words[100:5_000], rng.randint(2, 3))), turn_scopes(rng))
        for _ in range(queries)
    ]
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "projection.db"
        seconds = asyncio.run(write(path, records))
        shared, found = asyncio.run(kept_open(path, searches))
        alone = own_connection(path, searches)
        hybrid_lines = []
        if hybrid:
            asyncio.run(write(path, solo_records(rng, words, weights, count)))
            hybrid_lines = measure_hybrid(path, searches, rng, seed, count)
        file_mb = path.stat().st_size / 1e6
    return [
        f"{count:,} records of acme and {count:,} of bravo; projection file {file_mb:.1f} MB",
        f"index writes      {len(records) / seconds:9.0f} records/s",
        f"search (gateway)  p50 {shared.median_ms:6.2f} ms  p95 {shared.p95_ms:6.2f} ms"
        f"  ({found} of {queries} searches found records)",
        f"search_memory     p50 {alone.median_ms:6.2f} ms  p95 {alone.p95_ms:6.2f} ms",
        *hybrid_lines,
    ]


def measure_hybrid(
    path: Path, searches: Sequence[MemorySearch], rng: random.Random, seed: int, count: int
) -> list[str]:
    asyncio.run(give_vectors(path, seed))
    query = query_vector(rng)
    shared, _ = asyncio.run(kept_open(path, searches, query))
    alone = own_connection(path, searches, query)
    everything = [MemorySearch(s.query, (SOLO,)) for s in searches]
    widest, _ = asyncio.run(kept_open(path, everything, query))
    return [
        f"hybrid, {WIDTH} floats a vector, brute force within the scopes:",
        f"  a turn's scopes    gateway p50 {shared.median_ms:6.2f} ms  p95 {shared.p95_ms:6.2f} ms",
        f"  a turn's scopes    search_memory p50 {alone.median_ms:6.2f} ms"
        f"  p95 {alone.p95_ms:6.2f} ms",
        f"  one scope of {count:,}  gateway p50 {widest.median_ms:6.2f} ms"
        f"  p95 {widest.p95_ms:6.2f} ms",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--records", default="10000,100000", help="records a tenant, runs")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hybrid", action="store_true", help="with vectors, searched hybrid")
    args = parser.parse_args(argv)
    try:
        counts = [int(part) for part in args.records.split(",")]
    except ValueError:
        parser.error("--records is a comma-separated list of whole numbers")
    if min([*counts, args.queries]) < 1:
        parser.error("--records and --queries must be at least 1")
    for count in counts:
        for line in measure(count, args.queries, args.seed, hybrid=args.hybrid):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
