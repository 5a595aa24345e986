"""Time to first token and generation speed of one model call."""

from __future__ import annotations

import time

from schemas.model import Timing


class Stopwatch:
    """Started when the model starts on a call (after any queue); told of each token."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._first = 0.0
        self._last = 0.0

    def token(self) -> None:
        now = time.perf_counter()
        self._first = self._first or now
        self._last = now

    def timing(self, tokens: int) -> Timing:
        """`tokens` generated in all: the rate counts those after the first."""
        if not self._first:
            return Timing()
        span = self._last - self._first
        rate = (tokens - 1) / span if tokens > 1 and span > 0 else 0.0
        return Timing(first_token_seconds=self._first - self._started, tokens_per_second=rate)
