"""How long to wait before reconnecting, and when to give up."""

from __future__ import annotations

import time

RETRY_FOR = 10.0
"""Seconds a request is sent again after no answer or a 503, when that cannot do anything
twice: a Restate node's failover takes about four."""


class Backoff:
    """Delays of 0.1 s doubling up to 2 s while no connection is made; reset by a
    connection. Exhausted once `retry_for` seconds passed since the last connection."""

    def __init__(self, retry_for: float, first: float = 0.1, most: float = 2.0) -> None:
        self.retry_for = retry_for
        self.first = first
        self.most = most
        self._delay = first
        self._since = time.monotonic()

    def connected(self) -> None:
        self._delay = self.first
        self._since = time.monotonic()

    def exhausted(self) -> bool:
        return time.monotonic() - self._since > self.retry_for

    def next_delay(self) -> float:
        delay = self._delay
        self._delay = min(self._delay * 2, self.most)
        return delay
