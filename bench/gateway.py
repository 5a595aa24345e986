"""The gateway's per-request cost of its key cache and its rate limiter, in process.

    python -m bench.gateway [--requests 3000] [--batch 100]

A gateway app on a projection of its own (a temporary home) with one key, its `Tenant`
record answered by an `httpx.MockTransport` as Restate's admin SQL answers it (so a cache
miss costs the lookup and the confirmation's Python, not a network round trip), called
through `httpx.ASGITransport` with `GET /v1/me`, one request at a time, in batches that
take turns between three variants (after a warm-up of each), so that a change in the
machine's load meets each variant alike:

- `no cache, no limit`: every request reads the key from the projection and confirms it
  with the tenant's record (`TEASPILL_KEY_CACHE_SECONDS=0`, `TEASPILL_KEY_RATE=0`);
- `cache`: the key's lookup cached (the default 10 s), no rate limit;
- `cache + rate`: the default cache and a rate limit that never refuses.

Prints p50 and p95 over the batches of the wall and CPU microseconds a request; then the
two parts alone, p50 and p95 of single calls: `RateLimiter.take` and a cache hit of
`KeyCache.find`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec

from schemas.tenant import ApiKey, Keys
from services.gateway.app import create_app
from services.gateway.rates import RateLimiter
from services.keys import hash_key, new_key
from services.projection.store import ProjectionStore
from services.settings import Settings

CREATED = datetime(2026, 12, 1, tzinfo=UTC)
VARIANTS = {
    "no cache, no limit": {"key_cache_seconds": 0.0, "key_rate": 0.0},
    "cache": {"key_rate": 0.0},
    "cache + rate": {"key_rate": 1e9, "key_burst": 1_000_000},
}


def tenant(key: ApiKey) -> httpx.MockTransport:
    """The admin API's answer to the query for the tenant's stored keys."""
    held = {"rows": [{"value": msgspec.json.encode(Keys((key,))).hex()}]}
    return httpx.MockTransport(lambda request: httpx.Response(200, json=held))


async def timed(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    spent = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        spent.append((time.perf_counter() - start) * 1e6)
    return spent


@dataclass
class Sample:
    """Per batch of requests: wall and CPU microseconds a request (the process's CPU,
    aiosqlite's threads included, so other processes on the machine count less)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


async def batch(call: Callable[[], Awaitable[object]], size: int, into: Sample) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(size):
        await call()
    into.wall.append((time.perf_counter() - wall) * 1e6 / size)
    into.cpu.append((time.process_time() - cpu) * 1e6 / size)


@contextlib.asynccontextmanager
async def gateway(
    home: Path, key: tuple[str, ApiKey], overrides: dict[str, float]
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    plaintext, record = key
    config = Settings(home=home, **overrides)  # type: ignore[arg-type]
    app = create_app(config, ingress_transport=tenant(record))
    auth = {"Authorization": f"Bearer {plaintext}"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client,
    ):

        async def me() -> None:
            response = await client.get("/v1/me", headers=auth)
            if response.status_code != httpx.codes.OK:
                raise SystemExit(f"GET /v1/me answered {response.status_code}: {response.text}")

        yield me


async def variants(home: Path, key: tuple[str, ApiKey], n: int, size: int) -> dict[str, Sample]:
    """The variants' batches interleaved, so that a change in the machine's load meets
    each of them alike."""
    samples = {name: Sample() for name in VARIANTS}
    async with contextlib.AsyncExitStack() as stack:
        calls = {
            name: await stack.enter_async_context(gateway(home, key, overrides))
            for name, overrides in VARIANTS.items()
        }
        for call in calls.values():
            await timed(call, size)
        for _ in range(max(1, n // size)):
            for name, call in calls.items():
                await batch(call, size, samples[name])
    return samples


async def parts(home: Path, key: tuple[str, ApiKey], n: int) -> dict[str, list[float]]:
    plaintext, record = key
    limiter = RateLimiter(1e9, 1_000_000)

    async def take() -> None:
        limiter.take(record.id)

    app = create_app(Settings(home=home), ingress_transport=tenant(record))
    keys = app.state.runtime.keys
    wanted = hash_key(plaintext)
    async with app.router.lifespan_context(app):
        await keys.find(wanted)
        return {
            "RateLimiter.take": await timed(take, n),
            "KeyCache.find (hit)": await timed(lambda: keys.find(wanted), n),
        }


def spread(spent: list[float]) -> str:
    p95 = statistics.quantiles(spent, n=20)[-1] if len(spent) > 1 else spent[0]
    return f"p50 {statistics.median(spent):8.1f}  p95 {p95:8.1f}"


async def run(n: int, size: int) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        key = new_key("acme", "read", CREATED)
        async with await ProjectionStore.open(home / "projection.db") as store:
            await store.record_key(key[1])
        lines = [
            f"GET /v1/me, {n} requests a variant one at a time in batches of {size} "
            "(in process), µs a request over the batches:",
            f"{'':<20} {'wall':<24} cpu",
        ]
        for name, sample in (await variants(home, key, n, size)).items():
            lines.append(f"{name:<20} {spread(sample.wall)}   {spread(sample.cpu)}")
        lines.append("the parts alone, µs a call:")
        for name, spent in (await parts(home, key, n)).items():
            lines.append(f"{name:<20} {spread(spent)}")
        return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--requests", type=int, default=3000, help="requests per variant")
    parser.add_argument("--batch", type=int, default=100, help="requests per batch")
    args = parser.parse_args()
    if args.batch < 1 or args.requests < 2 * args.batch:
        parser.error("--batch must be at least 1 and --requests at least two batches")
    print("\n".join(asyncio.run(run(args.requests, args.batch))))


if __name__ == "__main__":
    main()
