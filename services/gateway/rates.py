"""Per-key limits on the gateway: requests per second, things a day, and open streams at
once.

`RateLimiter` is a token bucket per key: `rate` tokens a second, holding at most `burst`,
each request taking one. A request that finds the bucket empty is answered 429 with
`Retry-After` (whole seconds until a token is there). `DailyCap` counts what each key
did in a day, UTC, and refuses past `limit` until midnight (429, `Retry-After`).
`StreamSlots` counts each key's open streams (SSE, AG-UI, and the A2A and MCP requests
that wait on a turn); past `limit` a new one is refused (429, or its protocol's error)
until one closes.

All live in the process's memory: with several gateways each enforces its own share.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from services.gateway.errors import ApiError

TRACKED = 100_000
"""Keys whose buckets are kept; the least recently seen is forgotten first (a forgotten
bucket is a full one, which is what an idle key's bucket is anyway)."""


class RateLimiter:
    def __init__(
        self,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        what: str = "API key",
        requests: str = "requests",
    ) -> None:
        """`what` the buckets are of and the `requests` they count, as the 429's sentence
        names them."""
        self.what = what
        self.requests = requests
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key_id: str) -> None:
        """Spend one request of `key_id`'s bucket; raises 429 when it is empty."""
        if self.rate <= 0:
            return
        now = self._clock()
        tokens, then = self._buckets.pop(key_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens < 1.0:
            self._buckets[key_id] = (tokens, now)
            wait = max(1, math.ceil((1.0 - tokens) / self.rate))
            raise ApiError(
                429,
                f"{self.what} {key_id} sent more than {self.rate:g} {self.requests} a second "
                f"(bursts of {self.burst}); retry in {wait} s",
                {"Retry-After": str(wait)},
            )
        self._buckets[key_id] = (tokens - 1.0, now)
        if len(self._buckets) > TRACKED:
            self._buckets.popitem(last=False)


class DailyCap:
    def __init__(
        self,
        limit: int,
        sentence: Callable[[str, int, str], str],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),  # noqa: TID251 - not durable
    ) -> None:
        """At most `limit` a key a day (0: no limit); `sentence(key, limit, day)` says why
        one more is refused."""
        self.limit = limit
        self._sentence = sentence
        self._clock = clock
        self._day = ""
        self._counts: dict[str, int] = {}

    def take(self, key_id: str) -> None:
        """Count one more for `key_id` today; raises 429 when it has its `limit` already."""
        if not self.limit:
            return
        now = self._clock()
        day = now.date().isoformat()
        if day != self._day:
            self._day, self._counts = day, {}
        done = self._counts.get(key_id, 0)
        if done >= self.limit:
            midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
            wait = max(1, math.ceil((midnight - now).total_seconds()))
            raise ApiError(429, self._sentence(key_id, self.limit, day), {"Retry-After": str(wait)})
        self._counts[key_id] = done + 1


class StreamSlots:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def hold(self, key_id: str) -> Callable[[], None]:
        """Take one of `key_id`'s stream slots; returns what gives it back (once). Raises
        429 when the key holds `limit` already."""
        held = self._open.get(key_id, 0)
        if held >= self.limit:
            raise ApiError(
                429,
                f"API key {key_id} has {held} streams open, the most one key may hold; "
                "close one first",
                {"Retry-After": "1"},
            )
        self._open[key_id] = held + 1
        given_back = False

        def release() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                left = self._open[key_id] - 1
                if left:
                    self._open[key_id] = left
                else:
                    del self._open[key_id]

        return release

    def held(self, key_id: str) -> int:
        return self._open.get(key_id, 0)
