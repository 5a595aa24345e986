"""The gateway's per-request cost of its key cache and its rate limiter, in process.

    python -m bench.gateway [--requests 3000]

A gateway app on a projection of its own (a temporary home) with one key, its `Tenant`
record answered by an `httpx.MockTransport` (so a cache miss costs the lookup and the
confirmation's Python, not a network round trip), called through `httpx.ASGITransport`
with `GET /v1/me`, one request at a time. Three variants, each after a warm-up:

- `no cache, no limit`: every request reads the key from the projection and confirms it
  with the tenant's record (`TEASPILL_KEY_CACHE_SECONDS=0`, `TEASPILL_KEY_RATE=0`);
- `cache`: the key's lookup cached (the default 10 s), no rate limit;
- `cache + rate`: the default cache and a rate limit that never refuses.

Then the two parts alone: `RateLimiter.take` and a cache hit of `KeyCache.find`. Prints
p50 and p95 in microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
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
    held = msgspec.json.encode(Keys((key,)))
    return httpx.MockTransport(lambda request: httpx.Response(200, content=held))


async def timed(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    spent = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        spent.append((time.perf_counter() - start) * 1e6)
    return spent


async def variant(
    home: Path, key: tuple[str, ApiKey], overrides: dict[str, float], n: int
) -> list[float]:
    plaintext, record = key
    config = Settings(home=home, **overrides)  # type: ignore[arg-type]
    app = create_app(config, ingress_transport=tenant(record))
    auth = {"Authorization": f"Bearer {plaintext}"}
    transport = httpx.ASGITransport(app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://gateway") as client,
    ):

        async def me() -> None:
            response = await client.get("/v1/me", headers=auth)
            if response.status_code != httpx.codes.OK:
                raise SystemExit(f"GET /v1/me answered {response.status_code}: {response.text}")

        await timed(me, n // 10)
        return await timed(me, n)


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


def line(name: str, spent: list[float]) -> str:
    p50 = statistics.median(spent)
    p95 = statistics.quantiles(spent, n=20)[-1]
    return f"{name:<22} p50 {p50:8.1f} µs   p95 {p95:8.1f} µs"


async def run(n: int) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        key = new_key("acme", "read", CREATED)
        async with await ProjectionStore.open(home / "projection.db") as store:
            await store.record_key(key[1])
        lines = [f"GET /v1/me, {n} requests one at a time (in process):"]
        for name, overrides in VARIANTS.items():
            lines.append(line(name, await variant(home, key, overrides, n)))
        lines.append("the parts alone:")
        for name, spent in (await parts(home, key, n)).items():
            lines.append(line(name, spent))
        return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--requests", type=int, default=3000, help="requests per variant")
    args = parser.parse_args()
    if args.requests < 20:
        parser.error("--requests must be at least 20")
    print("\n".join(asyncio.run(run(args.requests))))


if __name__ == "__main__":
    main()
