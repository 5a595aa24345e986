"""Median and p95 of a sample of milliseconds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    median_ms: float
    p95_ms: float
    samples: int


def spread(values_ms: Sequence[float]) -> Spread:
    """Median and p95 (nearest rank: the smallest value with 95% of the sample at or below)."""
    if not values_ms:
        raise ValueError("a spread needs at least one value")
    ordered = sorted(values_ms)
    rank = math.ceil(0.95 * len(ordered))
    return Spread(statistics.median(ordered), ordered[rank - 1], len(ordered))
