"""Hybrid ranking, pure: the rows nearest a query's vector (brute-force cosine over the
candidates given, which the caller has already filtered by tenant and scope, or tenant and
release), and the reciprocal-rank fusion of that list with BM25's.

Reciprocal-rank fusion scores a row `sum(1 / (K + rank))` over the lists it is in (rank
from 1), so a row high in either list rises and one high in both rises most; it needs no
scores, only orders, which is why BM25's (a value over the index every tenant shares) is
never read. Ties keep BM25's order, then the vector list's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

K = 60
"""RRF's constant (the value of the paper that proposed it)."""
CANDIDATES = 50
"""Rows each list contributes to the fusion at most."""

Key = TypeVar("Key", bound=Hashable)


def nearest(query: bytes, rows: Sequence[tuple[Key, bytes]], n: int = CANDIDATES) -> list[Key]:
    """The keys of the `n` rows whose vectors are nearest `query` (cosine, most similar
    first, ties by position); rows whose vector has another length are left out."""
    width = len(query)
    kept = [(key, blob) for key, blob in rows if len(blob) == width]
    if not kept or not width:
        return []
    matrix = np.frombuffer(b"".join(blob for _, blob in kept), dtype="<f4").reshape(len(kept), -1)
    similarity = matrix @ np.frombuffer(query, dtype="<f4")
    order = np.argsort(-similarity, kind="stable")[:n]
    return [kept[int(i)][0] for i in order]


def fuse(bm25: Sequence[Key], vector: Sequence[Key], limit: int) -> list[Key]:
    """The first `limit` keys of the two lists by reciprocal-rank fusion."""
    score: dict[Key, float] = {}
    for ranked in (bm25, vector):
        for rank, key in enumerate(ranked[:CANDIDATES], start=1):
            score[key] = score.get(key, 0.0) + 1.0 / (K + rank)
    seen: dict[Key, int] = {}
    for i, key in enumerate([*bm25, *vector]):
        seen.setdefault(key, i)
    return sorted(score, key=lambda key: (-score[key], seen[key]))[:limit]
