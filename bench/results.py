"""What a benchmark run measured, summarised from its turns, timelines and CPU times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.cpu import CpuTimes
from bench.stats import Spread, spread
from bench.timeline import round_gaps, turn_span_ms, turns_of
from schemas.events import Event


@dataclass(frozen=True)
class Span:
    """One turn at the ingress client, in `time.perf_counter` seconds."""

    started: float
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass(frozen=True)
class Gaps:
    """Where a calculator round's time goes, from the agent's own event timestamps."""

    append: Spread
    tool: Spread
    model: Spread


@dataclass(frozen=True)
class CpuPerRound:
    """Milliseconds of CPU each part spent per round, until the projection caught up."""

    restate_ms: float
    endpoint_ms: float
    """The endpoint that served the rounds: teaspill's, or the plain loop's."""
    client_ms: float

    @property
    def stack_ms(self) -> float:
        """restate-server and the endpoint: what the rounds cost the machine."""
        return self.restate_ms + self.endpoint_ms


@dataclass(frozen=True)
class Result:
    benchmark: str
    agents: int
    turns_per_agent: int
    rounds_per_turn: int
    per_round: Spread
    """Turn wall time at the ingress client / rounds, one sample per turn."""
    in_agent: Spread
    """TurnStarted to TurnEnded as the agent recorded them / rounds, one sample per turn."""
    rounds_per_second: float
    """All rounds / the time from the first turn's start to the last turn's end."""
    wall_s: float
    projected_after_s: float
    """From the last turn's end until the projection held every event."""
    gaps: Gaps
    cpu: CpuPerRound
    samples_ms: list[float] = field(default_factory=list)
    """Per-round milliseconds of each turn, in the order the turns ran (sequential) or
    the agents were started (concurrent)."""


@dataclass(frozen=True)
class Run:
    """The raw material of one benchmark run."""

    benchmark: str
    rounds: int
    spans: list[Span]
    projected_at: float
    cpu: CpuTimes
    timelines: list[list[Event]]


def summarize(run: Run) -> Result:
    per_round = [span.seconds * 1000.0 / run.rounds for span in run.spans]
    ended = max(s.ended for s in run.spans)
    wall = ended - min(s.started for s in run.spans)
    total_rounds = len(run.spans) * run.rounds
    turns = [turn for events in run.timelines for turn in turns_of(events, run.rounds)]
    return Result(
        benchmark=run.benchmark,
        agents=len(run.timelines),
        turns_per_agent=len(run.spans) // len(run.timelines),
        rounds_per_turn=run.rounds,
        per_round=spread(per_round),
        in_agent=spread([turn_span_ms(turn) / run.rounds for turn in turns]),
        rounds_per_second=total_rounds / wall,
        wall_s=wall,
        projected_after_s=max(run.projected_at - ended, 0.0),
        gaps=_gaps(run.timelines),
        cpu=cpu_per_round(run.cpu, total_rounds),
        samples_ms=[round(ms, 3) for ms in per_round],
    )


def _gaps(timelines: Sequence[list[Event]]) -> Gaps:
    gaps = [gap for events in timelines for gap in round_gaps(events)]
    if not gaps:  # one-round turns have no calculator round
        none = spread([0.0])
        return Gaps(none, none, none)
    return Gaps(
        append=spread([g.append_ms for g in gaps]),
        tool=spread([g.tool_ms for g in gaps]),
        model=spread([g.model_ms for g in gaps]),
    )


def cpu_per_round(cpu: CpuTimes, rounds: int, *, plain: bool = False) -> CpuPerRound:
    return CpuPerRound(
        restate_ms=cpu.restate * 1000.0 / rounds,
        endpoint_ms=(cpu.plain if plain else cpu.endpoint) * 1000.0 / rounds,
        client_ms=cpu.client * 1000.0 / rounds,
    )
