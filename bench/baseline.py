"""The plain loop's side of the comparison: its endpoint, and the round benchmarks'
workloads (sequential, concurrent, crowded) run against it.

The turns are the ones `bench/rounds.py` sends teaspill (the same script, R-1 calculator
rounds, then the reply), and every reply is checked: the reply text, the rounds it took
and every calculator result. Per-round time is a turn's wall time at the ingress client
divided by its rounds, as for teaspill; CPU is restate-server's and the plain endpoint's.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec

from bench import BenchError
from bench.cpu import PLAIN_APP, cpu_times
from bench.plain import HANDLER, SERVICE, PlainReply, PlainTurn
from bench.results import CpuPerRound, Span, cpu_per_round
from bench.rounds import TURN_TIMEOUT, Plan, all_at_once, reply_text, turn_script
from bench.stats import Spread, spread
from bench.timeline import expected_result
from services.settings import Settings
from services.stack import Endpoint, free_port, register

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PlainResult:
    benchmark: str
    agents: int
    turns_per_agent: int
    rounds_per_turn: int
    per_round: Spread
    """Turn wall time at the ingress client / rounds, one sample per turn."""
    rounds_per_second: float
    wall_s: float
    cpu: CpuPerRound
    samples_ms: list[float] = field(default_factory=list)


def plain_settings(settings: Settings) -> Settings:
    """The plain endpoint's settings: its own port, and its own home for its log and its
    tools' files, on the same restate-server."""
    return settings.model_copy(
        update={"home": settings.home / "plain", "endpoint_port": free_port()}
    )


def plain_endpoint(settings: Settings) -> Endpoint:
    """Not yet started. `bench` is not installed as a package: the endpoint finds it on
    PYTHONPATH."""
    return Endpoint(settings, PLAIN_APP, env={"PYTHONPATH": str(REPO)})


def start_plain(endpoint: Endpoint) -> None:
    endpoint.start()
    register(endpoint.settings)


def plain_turn(client: httpx.Client, key: str, turn: int, rounds: int) -> Span:
    """One turn of `rounds` rounds on the plain loop, checked."""
    body = msgspec.json.encode(PlainTurn(turn_script(turn, rounds), rounds))
    started = time.perf_counter()
    answer = client.post(
        f"/{SERVICE}/{key}/{HANDLER}", content=body, headers={"content-type": "application/json"}
    )
    ended = time.perf_counter()
    if not answer.is_success:
        raise BenchError(
            f"the plain loop's turn {turn} of {key} failed: Restate answered"
            f" {answer.status_code}: {answer.text.strip()[:300]}"
        )
    reply = msgspec.json.decode(answer.content, type=PlainReply)
    results = tuple(expected_result(turn, round_) for round_ in range(1, rounds))
    if reply != PlainReply(reply_text(turn), rounds, results):
        raise BenchError(f"the plain loop's turn {turn} of {key} answered {reply!r}.")
    return Span(started, ended)


@contextlib.contextmanager
def clients(url: str, agents: int) -> Iterator[list[httpx.Client]]:
    """A client per agent (as teaspill's agents have, `bench.rounds`), made before the
    clock starts."""
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(httpx.Client(base_url=url, timeout=TURN_TIMEOUT))
            for _ in range(agents)
        ]


def plain_warm_up(url: str, plan: Plan) -> None:
    with httpx.Client(base_url=url, timeout=TURN_TIMEOUT) as client:
        plain_turn(client, "warm-up", 1, plan.rounds)


def plain_sequential(url: str, plan: Plan) -> PlainResult:
    """One key, `plan.turns` turns one after another."""
    with httpx.Client(base_url=url, timeout=TURN_TIMEOUT) as client:

        def run() -> list[Span]:
            return [
                plain_turn(client, plan.name("sequential"), n, plan.rounds)
                for n in range(1, plan.turns + 1)
            ]

        return _measure("plain-sequential", 1, plan.rounds, run)


def plain_first_turns(url: str, plan: Plan) -> PlainResult:
    """`plan.turns` new keys one after another, one turn each."""
    keys = [f"{plan.name('first')}-{n}" for n in range(plan.turns)]
    with httpx.Client(base_url=url, timeout=TURN_TIMEOUT) as client:

        def run() -> list[Span]:
            return [plain_turn(client, key, 1, plan.rounds) for key in keys]

        return _measure("plain-first-turns", plan.turns, plan.rounds, run)


def plain_concurrent(url: str, plan: Plan) -> PlainResult:
    """`plan.agents` keys, all started at the same moment, each running
    `plan.agent_turns` turns one after another."""
    return _at_once(url, "plain-concurrent", plan.name("concurrent"), plan.agents, plan)


def plain_crowded(url: str, plan: Plan) -> PlainResult:
    """`plain-concurrent` with `plan.crowd` keys."""
    return _at_once(url, "plain-crowded", plan.name("crowded"), plan.crowd, plan)


def _at_once(url: str, name: str, stem: str, agents: int, plan: Plan) -> PlainResult:
    keys = [f"{stem}-{index}" for index in range(agents)]
    with clients(url, agents) as made:

        def turns_of(client: httpx.Client, key: str) -> list[Span]:
            return [
                plain_turn(client, key, turn, plan.rounds)
                for turn in range(1, plan.agent_turns + 1)
            ]

        work = [
            functools.partial(turns_of, client, key) for client, key in zip(made, keys, strict=True)
        ]
        return _measure(name, agents, plan.rounds, lambda: all_at_once(work, keys))


def _measure(name: str, agents: int, rounds: int, run: Callable[[], list[Span]]) -> PlainResult:
    before = cpu_times()
    spans = run()
    cpu = cpu_times() - before
    per_round = [span.seconds * 1000.0 / rounds for span in spans]
    wall = max(s.ended for s in spans) - min(s.started for s in spans)
    total = len(spans) * rounds
    return PlainResult(
        benchmark=name,
        agents=agents,
        turns_per_agent=len(spans) // agents,
        rounds_per_turn=rounds,
        per_round=spread(per_round),
        rounds_per_second=total / wall,
        wall_s=wall,
        cpu=cpu_per_round(cpu, total, plain=True),
        samples_ms=[round(ms, 3) for ms in per_round],
    )
