"""Benchmarks, most of them against a real stack (restate-server and the service endpoint).

Run those with `python -m bench` (or `make bench`); a few measure one part in process
(`python -m bench.commits`, `bench.wake`, `bench.models`). `docs/benchmarks.md` has the
figures.
"""

from __future__ import annotations


class BenchError(RuntimeError):
    """A run went wrong (a broken timeline, a failed turn); its figures must not be reported."""
