"""The knowledge search benchmark runs end to end on a small corpus (its figures are in
docs/benchmarks.md; this checks the program, not the speed)."""

from __future__ import annotations

import pytest

from bench.knowledge import main


def test_the_benchmark_indexes_searches_and_prints_its_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--documents", "5", "--chars", "2000", "--queries", "10"]) == 0
    out = capsys.readouterr().out
    assert "5 documents" in out
    assert "search_docs       p50" in out
    assert "of 10 queries found passages" in out
