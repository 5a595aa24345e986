"""bench.tracing's figures, without a stack: per-round spreads and the cost it reports."""

from __future__ import annotations

from bench.results import Span
from bench.stats import Spread
from bench.tracing import Figures, per_round, report


def test_per_round_divides_each_turn_by_its_rounds() -> None:
    spread = per_round([Span(0.0, 0.030), Span(1.0, 1.060)], rounds=3)
    assert round(spread.median_ms, 6) == 15.0
    assert spread.samples == 2


def test_the_report_sets_tracing_beside_off_and_the_plain_loop() -> None:
    figures = Figures(
        30, 3, Spread(14.0, 20.0, 30), Spread(13.0, 19.0, 30), Spread(8.0, 12.0, 30), 450, 9.5, 9.25
    )
    text = report(figures)
    assert "tracing's cost: +1.00 ms a round (median)" in text
    assert "plain Restate loop" in text
    assert "spans in the trace store: 450" in text
    assert "endpoint CPU a round: 9.50 ms traced, 9.25 ms off" in text
