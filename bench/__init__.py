"""Benchmarks that run against a real stack (restate-server and the service endpoint).

Run them with `python -m bench` (or `make bench`); `docs/benchmarks.md` has the figures.
"""

from __future__ import annotations


class BenchError(RuntimeError):
    """A run went wrong (a broken timeline, a failed turn); its figures must not be reported."""
