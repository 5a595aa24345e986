"""teaspill beside the plain loop: the figures of one run side by side, their ratios, and
the goals the round is held to, each marked pass or miss.

Goals: sequential ms per round (p50) at most 1.5x the plain loop's; a new agent's first
turn (p50, `first-turns`) at most 1.5x the plain loop's; rounds/s with the `concurrent`
agents at least 0.7x the plain loop's; the projection caught up at most 1 s after the last
of those agents' turns ended.

With `--repeat N` each benchmark and its plain twin run N times, one after the other: a
row then holds the median of each side, and its ratio is the median of the N pairs'
ratios (a pair runs minutes apart at most, so the machine's swings hit both sides).
"""

from __future__ import annotations

import operator
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bench.baseline import PlainResult
from bench.journal import JournalCost
from bench.report import table
from bench.results import Result


@dataclass(frozen=True)
class Goal:
    text: str
    met: Callable[[float, float], bool]
    """(ratio, teaspill's figure) -> met."""


SEQUENTIAL_GOAL = Goal("<= 1.5x", lambda ratio, _: ratio <= 1.5)
CONCURRENT_GOAL = Goal(">= 0.7x", lambda ratio, _: ratio >= 0.7)
PROJECTION_GOAL = Goal("<= 1 s", lambda _, seconds: seconds <= 1.0)
GOALS = {goal.text: goal for goal in (SEQUENTIAL_GOAL, CONCURRENT_GOAL, PROJECTION_GOAL)}


@dataclass(frozen=True)
class Row:
    figure: str
    teaspill: float
    plain: float | None
    goal: str = ""
    met: bool | None = None
    ratios: tuple[float, ...] = ()
    """Each pair's ratio, when the row is the median of repeated pairs."""

    @property
    def ratio(self) -> float | None:
        if self.ratios:
            return statistics.median(self.ratios)
        return None if not self.plain else self.teaspill / self.plain


def compare(
    rounds: Sequence[Result], plain: Sequence[PlainResult], journal: Sequence[JournalCost]
) -> list[Row]:
    """The rows for which both sides ran in this run; repeated runs of a benchmark are
    paired in order and each row is their median."""
    ours = _by_name(rounds, "")
    theirs = _by_name(plain, "plain-")
    rows: list[Row] = []
    for name in ("sequential", "first-turns", "concurrent", "crowded"):
        if name in ours and name in theirs:
            pairs = [_pair(a, b) for a, b in zip(ours[name], theirs[name], strict=False)]
            rows += [_median(list(same)) for same in zip(*pairs, strict=True)]
    if "concurrent" in ours:
        runs = ours["concurrent"]
        lag = statistics.median(r.projected_after_s for r in runs)
        figure = f"projection caught up, {runs[0].agents} agents, s"
        rows.append(_row(figure, lag, None, PROJECTION_GOAL))
    costs = {c.system: c for c in journal}
    if {"teaspill", "plain loop"} <= costs.keys():
        rows += _journal_rows(costs["teaspill"], costs["plain loop"])
    return rows


def _by_name(results: Sequence[Result | PlainResult], prefix: str) -> dict[str, list[Any]]:
    runs: dict[str, list[Any]] = {}
    for result in results:
        runs.setdefault(result.benchmark.removeprefix(prefix), []).append(result)
    return runs


def _median(same: list[Row]) -> Row:
    """One figure over repeated pairs: each side's median, and the median ratio."""
    if len(same) == 1:
        return same[0]
    plain = [row.plain for row in same if row.plain is not None]
    ratios = tuple(row.ratio for row in same if row.ratio is not None)
    median = replace(
        same[0],
        teaspill=statistics.median(row.teaspill for row in same),
        plain=statistics.median(plain) if plain else None,
        ratios=ratios,
    )
    goal = GOALS.get(median.goal)
    if goal is None:
        return median
    return replace(median, met=goal.met(median.ratio or 0.0, median.teaspill))


def _pair(ours: Result, theirs: PlainResult) -> list[Row]:
    if ours.benchmark == "sequential":
        return [
            _row(
                "sequential ms/round p50",
                ours.per_round.median_ms,
                theirs.per_round.median_ms,
                SEQUENTIAL_GOAL,
            ),
            _row("sequential ms/round p95", ours.per_round.p95_ms, theirs.per_round.p95_ms),
            _row("sequential CPU ms/round", ours.cpu.stack_ms, theirs.cpu.stack_ms),
        ]
    if ours.benchmark == "first-turns":
        return _first_turn_rows(ours, theirs)
    goal = CONCURRENT_GOAL if ours.benchmark == "concurrent" else None
    where = f"{ours.agents} agents"
    return [
        _row(f"rounds/s, {where}", ours.rounds_per_second, theirs.rounds_per_second, goal),
        _row(f"CPU ms/round, {where}", ours.cpu.stack_ms, theirs.cpu.stack_ms),
    ]


def _first_turn_rows(ours: Result, theirs: PlainResult) -> list[Row]:
    """A new agent's turn: its wall time (the rounds' median times the rounds), and each
    part's CPU per round."""
    rounds = ours.rounds_per_turn
    return [
        _row(
            f"new agent's {rounds}-round first turn ms p50",
            ours.per_round.median_ms * rounds,
            theirs.per_round.median_ms * theirs.rounds_per_turn,
            SEQUENTIAL_GOAL,
        ),
        _row("new agents: endpoint CPU ms/round", ours.cpu.endpoint_ms, theirs.cpu.endpoint_ms),
        _row("new agents: restate-server CPU ms/round", ours.cpu.restate_ms, theirs.cpu.restate_ms),
    ]


def _journal_rows(ours: JournalCost, theirs: JournalCost) -> list[Row]:
    turn = f"{ours.rounds}-round turn"
    return [
        _row(f"journal entries/round ({turn})", ours.entries_per_round, theirs.entries_per_round),
        _row(f"journal bytes/round ({turn})", ours.bytes_per_round, theirs.bytes_per_round),
        _row(
            f"invocations/round ({turn})", ours.invocations_per_round, theirs.invocations_per_round
        ),
    ]


def _row(figure: str, ours: float, theirs: float | None, goal: Goal | None = None) -> Row:
    row = Row(figure, ours, theirs)
    if goal is None:
        return row
    ratio = row.ratio if row.ratio is not None else 0.0
    return Row(figure, ours, theirs, goal.text, goal.met(ratio, ours))


def render(rows: Sequence[Row], costs: Sequence[JournalCost]) -> str:
    parts = []
    if rows:
        parts.append(
            "teaspill beside the plain loop (one restate-server, one run; CPU is"
            " restate-server + the endpoint)\n\n" + _compare_table(rows)
        )
    if costs:
        parts += [_service_table(costs), _type_table(costs)]
    return "\n\n".join(parts)


def _compare_table(rows: Sequence[Row]) -> str:
    lines = [
        [
            row.figure,
            _number(row.teaspill),
            "-" if row.plain is None else _number(row.plain),
            "-" if row.ratio is None else f"{row.ratio:.2f}x",
            row.goal,
            {None: "", True: "pass", False: "MISS"}[row.met],
            _range(row.ratios),
        ]
        for row in rows
    ]
    head = ["figure", "teaspill", "plain loop", "ratio", "goal", "met", "pairs' ratios"]
    if not any(row.ratios for row in rows):
        head, lines = head[:6], [line[:6] for line in lines]
    if not any(row.goal for row in rows):
        head, lines = head[:4], [line[:4] for line in lines]
    return table(head, lines)


def _range(ratios: Sequence[float]) -> str:
    if not ratios:
        return ""
    return f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)}"


def _service_table(costs: Sequence[JournalCost]) -> str:
    lines = [
        [
            f"{cost.system}: {service}",
            str(part.invocations),
            str(part.entries),
            f"{part.bytes:,}",
        ]
        for cost in costs
        for service, part in cost.by_service.items()
    ]
    lines += [
        [f"{c.system}: all", str(c.invocations), str(c.entries), f"{c.bytes:,}"] for c in costs
    ]
    rounds = costs[0].rounds
    return table([f"one {rounds}-round turn, by service", "invocations", "entries", "bytes"], lines)


def _type_table(costs: Sequence[JournalCost]) -> str:
    kinds = sorted({kind for cost in costs for kind in cost.by_type})
    lines = []
    for kind in kinds:
        cells = [kind]
        for cost in costs:
            tally = cost.by_type.get(kind)
            cells.append("-" if tally is None else f"{tally.entries} / {tally.bytes:,}")
        lines.append(cells)
    head = ["journal entries by type (entries / bytes)", *(c.system for c in costs)]
    return table(head, sorted(lines, key=operator.itemgetter(0)))


def _number(value: float) -> str:
    return f"{value:.1f}" if value < 1_000 else f"{value:,.0f}"


def plain_table(results: Sequence[PlainResult]) -> str:
    rows = [
        [
            r.benchmark,
            str(r.agents),
            str(r.turns_per_agent),
            str(r.rounds_per_turn),
            f"{r.per_round.median_ms:.1f}",
            f"{r.per_round.p95_ms:.1f}",
            f"{r.rounds_per_second:.1f}",
            f"{r.cpu.restate_ms:.1f}",
            f"{r.cpu.endpoint_ms:.1f}",
        ]
        for r in results
    ]
    head = ["plain loop", "agents", "turns", "rounds", "ms/round p50", "p95", "rounds/s"]
    return table([*head, "CPU ms/round restate", "endpoint"], rows)
