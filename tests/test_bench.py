"""The benchmark's own logic, without a stack: which benchmarks run in which order, and how
teaspill's figures are set beside the plain loop's and marked against the goals."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime

import pytest

from bench.__main__ import expand, parse_args
from bench.baseline import PlainResult
from bench.commits import main as commits_main
from bench.commits import round_batches
from bench.context import summarize, sustained_line
from bench.journal import JournalCost, ServiceCost
from bench.results import CpuPerRound, Gaps, Result
from bench.rounds import Plan
from bench.stats import Spread
from bench.versus import Row, compare, render
from bench.wake import main as wake_main
from schemas.events import ContextFolded, Event, EventBody, ModelMessage, TurnEnded
from schemas.model import Usage
from services.projection.postgres import PostgresStore
from services.stack.journal import Tally
from tests.fixtures.postgres import Cluster


def spread(median: float, p95: float | None = None) -> Spread:
    return Spread(median, p95 if p95 is not None else median, 10)


def ours(name: str, *, ms: float = 10.0, rate: float = 100.0, lag: float = 0.0) -> Result:
    none = spread(0.0)
    return Result(
        benchmark=name,
        agents=1 if name == "sequential" else 50,
        turns_per_agent=1,
        rounds_per_turn=10,
        per_round=spread(ms, 2 * ms),
        in_agent=spread(ms),
        rounds_per_second=rate,
        wall_s=1.0,
        projected_after_s=lag,
        gaps=Gaps(none, none, none),
        cpu=CpuPerRound(restate_ms=3.0, endpoint_ms=5.0, client_ms=1.0),
    )


def theirs(name: str, *, ms: float = 10.0, rate: float = 100.0) -> PlainResult:
    return PlainResult(
        benchmark=f"plain-{name}",
        agents=1 if name == "sequential" else 50,
        turns_per_agent=1,
        rounds_per_turn=10,
        per_round=spread(ms, 2 * ms),
        rounds_per_second=rate,
        wall_s=1.0,
        cpu=CpuPerRound(restate_ms=1.0, endpoint_ms=1.0, client_ms=1.0),
    )


def rows_by_figure(rows: list[Row]) -> dict[str, Row]:
    return {row.figure: row for row in rows}


def test_versus_runs_each_pair_then_journal_and_sse_last() -> None:
    assert expand(["sse", "versus"]) == [
        "sequential",
        "plain-sequential",
        "concurrent",
        "plain-concurrent",
        "crowded",
        "plain-crowded",
        "journal",
        "sse",
    ]
    assert expand(["journal", "sequential", "sequential"]) == ["sequential", "journal"]


def test_an_unknown_benchmark_is_refused_with_the_names_there_are(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["plain"])
    assert exited.value.code == 2
    assert "unknown benchmark 'plain'; choose from sequential," in capsys.readouterr().err


@pytest.mark.parametrize(("ms", "met"), [(15.0, True), (15.1, False)])
def test_sequential_ms_per_round_may_be_at_most_one_and_a_half_times_the_plain_loop(
    ms: float, met: bool
) -> None:
    rows = compare([ours("sequential", ms=ms)], [theirs("sequential", ms=10.0)], [])
    row = rows_by_figure(rows)["sequential ms/round p50"]
    assert row.ratio == pytest.approx(ms / 10.0)
    assert row.met is met
    assert rows_by_figure(rows)["sequential CPU ms/round"].ratio == pytest.approx(4.0)


@pytest.mark.parametrize(("ms", "met"), [(6.0, True), (6.1, False)])
def test_a_new_agents_first_turn_may_take_at_most_one_and_a_half_times_the_plain_loops(
    ms: float, met: bool
) -> None:
    """Ten rounds of `ms` against ten of 4 ms: the turn, not the round, is compared."""
    rows = rows_by_figure(
        compare([ours("first-turns", ms=ms)], [theirs("first-turns", ms=4.0)], [])
    )
    turn = rows["new agent's 10-round first turn ms p50"]
    assert turn.teaspill == pytest.approx(ms * 10)
    assert turn.plain == pytest.approx(40.0)
    assert turn.met is met
    assert rows["new agents: endpoint CPU ms/round"].ratio == pytest.approx(5.0)
    assert rows["new agents: restate-server CPU ms/round"].ratio == pytest.approx(3.0)


def test_new_agents_runs_the_first_turns_then_their_plain_twin() -> None:
    assert expand(["new-agents"]) == ["first-turns", "plain-first-turns"]


@pytest.mark.parametrize(("rate", "met"), [(70.0, True), (69.0, False)])
def test_rounds_per_second_with_50_agents_must_be_at_least_0_7_of_the_plain_loop(
    rate: float, met: bool
) -> None:
    rows = compare([ours("concurrent", rate=rate)], [theirs("concurrent", rate=100.0)], [])
    assert rows_by_figure(rows)["rounds/s, 50 agents"].met is met


@pytest.mark.parametrize(("lag", "met"), [(1.0, True), (1.2, False)])
def test_the_projection_must_catch_up_within_a_second(lag: float, met: bool) -> None:
    rows = compare([ours("concurrent", lag=lag)], [], [])
    [row] = rows
    assert (row.figure, row.plain, row.ratio, row.met) == (
        "projection caught up, 50 agents, s",
        None,
        None,
        met,
    )


def test_a_benchmark_without_its_twin_has_no_ratio_row() -> None:
    assert compare([ours("sequential")], [theirs("concurrent")], []) == []


def test_repeated_pairs_give_each_sides_median_and_the_median_of_the_pairs_ratios() -> None:
    rounds = [ours("concurrent", rate=r, lag=g) for r, g in ((60.0, 0.1), (50.0, 0.9), (90.0, 0.2))]
    plain = [theirs("concurrent", rate=r) for r in (100.0, 50.0, 120.0)]
    rows = rows_by_figure(compare(rounds, plain, []))
    row = rows["rounds/s, 50 agents"]
    assert (row.teaspill, row.plain) == (60.0, 100.0)
    assert row.ratios == pytest.approx((0.6, 1.0, 0.75))
    assert row.ratio == pytest.approx(0.75)  # the middle pair's, not 60 / 100
    assert row.met is True
    assert rows["projection caught up, 50 agents, s"].teaspill == 0.2
    assert "0.60-1.00x over 3" in render(list(rows.values()), [])


def test_one_run_has_no_column_of_pairs() -> None:
    rows = compare([ours("concurrent")], [theirs("concurrent")], [])
    assert "pairs' ratios" not in render(rows, [])


def journal_cost(system: str, entries: int, size: int, invocations: int) -> JournalCost:
    service = ServiceCost(invocations, entries, size)
    return JournalCost(
        system, 3, invocations, entries, size, {"S": service}, {"Command: Run": Tally(1, 9)}
    )


def test_journal_figures_are_per_round_and_shown_by_service_and_type() -> None:
    costs = [journal_cost("teaspill", 143, 60_000, 13), journal_cost("plain loop", 14, 4_000, 1)]
    rows = rows_by_figure(compare([], [], costs))
    entries = rows["journal entries/round (3-round turn)"]
    assert (entries.teaspill, entries.plain) == pytest.approx((143 / 3, 14 / 3))
    assert rows["invocations/round (3-round turn)"].ratio == pytest.approx(13.0)
    text = render(list(rows.values()), costs)
    assert "teaspill: S" in text
    assert "plain loop: all" in text
    assert "1 / 9" in text


def test_sustain_counts_failures_and_the_cache_share_after_folds() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)

    def said(prompt: int, cached: int) -> ModelMessage:
        return ModelMessage("smollm2", "hi", usage=Usage(prompt, 10, cached))

    bodies: list[EventBody] = [
        said(100, 0),
        TurnEnded("succeeded"),
        ContextFolded(1, 1, "Earlier.", 700, 300, "smollm2"),
        said(300, 150),
        said(400, 380),
        TurnEnded("failed", reason="It broke."),
        ContextFolded(2, 2, "Then.", 700, 300, "smollm2"),
        said(200, 50),
        TurnEnded("succeeded"),
    ]
    events = [Event("b.chat", n, 1, 1, at, body) for n, body in enumerate(bodies, 1)]
    result = summarize(1024, ["succeeded", "failed", "succeeded"], events, 3.0)
    assert (result.turns, result.succeeded, result.first_failure) == (3, 2, 2)
    assert (result.folds, result.rounds, result.max_prompt) == (2, 4, 400)
    assert result.ms_per_turn == 1000
    assert result.cached_after_fold == 200 / 500
    assert result.cached_overall == 580 / 900
    assert "| 1024 | 2 of 3 | 1 (first at turn 2) | 2 |" in sustained_line(result)
    with pytest.raises(SystemExit):
        summarize(1024, ["succeeded", "succeeded", "succeeded"], events, 3.0)


def test_each_repetition_has_agents_of_its_own() -> None:
    plan = Plan(agents=5, turns=3, rounds=3)
    names = {dataclasses.replace(plan, run=run).name("sequential") for run in range(3)}
    assert names == {"sequential", "sequential-r1", "sequential-r2"}


def test_the_commit_benchmark_writes_rounds_as_an_agent_hands_them_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    batches = round_batches("acme.bench.one", 3)
    assert [[e.seq for e in b.events] for b in batches] == [[1, 2], [3], [4, 5], [6], [7, 8], [9]]
    assert commits_main(["--rounds", "10", "--agents", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["1", "agent,"], ["2", "agents,"]]
    with pytest.raises(SystemExit) as refused:
        commits_main(["--rounds", "3"])
    assert refused.value.code == 2


def test_the_commit_benchmark_writes_into_a_postgresql_projection_when_given_one(
    capsys: pytest.CaptureFixture[str], postgres: Cluster
) -> None:
    url = postgres.database()
    assert commits_main(["--rounds", "10", "--agents", "2", "--url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["1", "agent,"], ["2", "agents,"]]

    async def agents() -> int:
        async with await PostgresStore.open(url, readonly=True) as store:
            return await store.agent_count("acme")

    assert asyncio.run(agents()) == 3
    with pytest.raises(SystemExit) as refused:
        commits_main(["--url", "sqlite:///x.db"])
    assert refused.value.code == 2


@pytest.mark.parametrize(
    ("flags", "model"),
    [([], "the model on its thread"), (["--model-on-loop"], "the model on the event loop")],
)
def test_the_wake_benchmark_runs_each_variants_turns_to_the_scripted_reply(
    flags: list[str], model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    small = ["--agents", "2", "--turns", "2", "--rounds", "3", "--repeat", "1"]
    assert wake_main([*small, *flags]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert model in lines[0]
    rows = {line[:24].strip(): line[24:].split() for line in lines[3:]}
    assert list(rows) == ["teaspill", "teaspill, no projection", "plain loop"]
    for figures in rows.values():  # "best / median" for the process, then the event loop
        assert figures[1] == figures[4] == "/"
        assert all(float(figure) > 0 for figure in (figures[0], figures[3]))
    with pytest.raises(SystemExit) as refused:
        wake_main(["--rounds", "1"])
    assert refused.value.code == 2


def test_the_voice_benchmark_counts_copies_of_tool_results_and_not_answers() -> None:
    from bench.voice import copied, message  # noqa: PLC0415

    result = '{"turns":[{"turn":1,"messages":[{"content":"the storm that broke the lamp"}]}]}'
    assert copied('The tool recall returned: {"turns": []}', [])
    assert copied("the storm that broke the lamp", [result])
    assert not copied("It was about a storm, I think, and a lamp that broke.", [result])
    assert not copied("", [result])
    assert len(message(3)) > 400
    assert "first story" in message(3)
