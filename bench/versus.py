"""teaspill beside the plain loop: the figures of one run side by side, their ratios, and
the goals the round is held to, each marked pass or miss.

Goals: sequential ms per round (p50) at most 1.5x the plain loop's; rounds/s with the
`concurrent` agents at least 0.7x the plain loop's; the projection caught up at most 1 s
after the last of those agents' turns ended.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Row:
    figure: str
    teaspill: float
    plain: float | None
    goal: str = ""
    met: bool | None = None

    @property
    def ratio(self) -> float | None:
        return None if not self.plain else self.teaspill / self.plain


def compare(
    rounds: Sequence[Result], plain: Sequence[PlainResult], journal: Sequence[JournalCost]
) -> list[Row]:
    """The rows for which both sides ran in this run."""
    ours = {r.benchmark: r for r in rounds}
    theirs = {r.benchmark.removeprefix("plain-"): r for r in plain}
    rows: list[Row] = []
    for name in ("sequential", "concurrent", "crowded"):
        if name in ours and name in theirs:
            rows += _pair(ours[name], theirs[name])
    if "concurrent" in ours:
        lag = ours["concurrent"].projected_after_s
        agents = ours["concurrent"].agents
        rows.append(_row(f"projection caught up, {agents} agents, s", lag, None, PROJECTION_GOAL))
    costs = {c.system: c for c in journal}
    if {"teaspill", "plain loop"} <= costs.keys():
        rows += _journal_rows(costs["teaspill"], costs["plain loop"])
    return rows


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
    goal = CONCURRENT_GOAL if ours.benchmark == "concurrent" else None
    where = f"{ours.agents} agents"
    return [
        _row(f"rounds/s, {where}", ours.rounds_per_second, theirs.rounds_per_second, goal),
        _row(f"CPU ms/round, {where}", ours.cpu.stack_ms, theirs.cpu.stack_ms),
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
        ]
        for row in rows
    ]
    head = ["figure", "teaspill", "plain loop", "ratio", "goal", "met"]
    if not any(row.goal for row in rows):
        head, lines = head[:4], [line[:4] for line in lines]
    return table(head, lines)


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
