"""The round-overhead benchmark: what a round costs when the model and the tool cost nothing.

A round is one model step (the `script` model: no model time), one tool step (the
built-in `calculator`) and their timeline appends. A turn runs R rounds: R-1 calculator
rounds, then the reply. Per-round time is a turn's wall time, as the ingress client sees
it, divided by R. Figures are summarised only after every timeline, and the projection's
copy of it, has been checked.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import BenchError
from bench.cpu import cpu_times
from bench.projection import check_projected, wait_projected
from bench.results import Result, Run, Span, summarize
from bench.timeline import check_timeline, events_per_turn, read_timeline
from schemas.spec import AgentSpec, Limits
from services.executor.scripted import script
from services.ingress import Ingress

TENANT = "bench"
TURN_TIMEOUT = 300.0
"""Seconds one ingress call may take; a scripted turn takes well under one."""
PROJECTION_TIMEOUT = 600.0
"""Seconds the projector may take to catch up after the turns; with 200 agents at once it
has fallen minutes behind."""


@dataclass(frozen=True)
class Plan:
    agents: int
    """Agents in the concurrent benchmark, all at work at the same time."""
    turns: int
    """Turns the sequential benchmark runs, one after another, on one agent."""
    rounds: int
    """Rounds per turn."""
    crowd: int = 200
    """Agents in the crowded benchmark: `concurrent` with more agents."""
    agent_turns: int = 1
    """Turns each agent of the concurrent and crowded benchmarks runs, one after another:
    more than one, so that rounds/s measures agents at work, not the slowest agent's
    single turn."""
    run: int = 0
    """Which repetition this is (`--repeat`): each has agents of its own."""

    def name(self, benchmark: str) -> str:
        """The agents' name stem for `benchmark` in this repetition."""
        return benchmark if self.run == 0 else f"{benchmark}-r{self.run}"


@dataclass(frozen=True)
class Target:
    """The running stack: Restate ingress, and the projection file its projector writes."""

    url: str
    projection: Path


def bench_spec(rounds: int) -> AgentSpec:
    return AgentSpec(
        kind="bench",
        instructions="Follow the script.",
        model="script",
        tools=("calculator",),
        limits=Limits(max_rounds=rounds),
    )


def turn_script(turn: int, rounds: int) -> str:
    calls = [
        {"calls": [{"name": "calculator", "arguments": {"expression": f"{turn}*{round_}"}}]}
        for round_ in range(1, rounds)
    ]
    return script(*calls, {"reply": reply_text(turn)})


def reply_text(turn: int) -> str:
    return f"turn {turn} done"


def client(target: Target) -> contextlib.closing[Ingress]:
    return contextlib.closing(Ingress(target.url, timeout=TURN_TIMEOUT))


def run_turn(ingress: Ingress, address: str, turn: int, rounds: int) -> Span:
    """One turn of `rounds` rounds, from the ingress call to the end of its wake."""
    started = time.perf_counter()
    result = ingress.message(address, turn_script(turn, rounds), bench_spec(rounds))
    ended = time.perf_counter()
    if result.reply != reply_text(turn):
        raise BenchError(f"{address} turn {turn} replied {result.reply!r}.")
    return Span(started, ended)


@dataclass(frozen=True)
class Workload:
    name: str
    addresses: list[str]
    turns_per_agent: int
    rounds: int
    run: Callable[[], list[Span]]
    """Runs every turn and returns their spans."""


def warm_up(target: Target, plan: Plan) -> None:
    """One checked turn before any measurement: first calls pay for connections and imports."""
    address = f"{TENANT}.warm-up"
    with client(target) as ingress:

        def turn() -> list[Span]:
            return [run_turn(ingress, address, 1, plan.rounds)]

        _measure(target, Workload("warm-up", [address], 1, plan.rounds, turn))


def sequential(target: Target, plan: Plan) -> Result:
    """One agent, `plan.turns` turns one after another."""
    address = f"{TENANT}.{plan.name('sequential')}"
    with client(target) as ingress:

        def turns() -> list[Span]:
            return [run_turn(ingress, address, n, plan.rounds) for n in range(1, plan.turns + 1)]

        return _measure(target, Workload("sequential", [address], plan.turns, plan.rounds, turns))


def first_turns(target: Target, plan: Plan) -> Result:
    """`plan.turns` new agents one after another, one turn each: what an agent's first
    turn costs (its spec resolved, its state made, its first projection write)."""
    addresses = [f"{TENANT}.{plan.name('first')}-{n}" for n in range(plan.turns)]
    with client(target) as ingress:

        def turns() -> list[Span]:
            return [run_turn(ingress, address, 1, plan.rounds) for address in addresses]

        return _measure(target, Workload("first-turns", addresses, 1, plan.rounds, turns))


def concurrent(target: Target, plan: Plan) -> Result:
    """`plan.agents` agents, all started at the same moment, each running
    `plan.agent_turns` turns one after another."""
    return _at_once(target, "concurrent", plan.name("concurrent"), plan.agents, plan)


def crowded(target: Target, plan: Plan) -> Result:
    """`concurrent` with `plan.crowd` agents."""
    return _at_once(target, "crowded", plan.name("crowded"), plan.crowd, plan)


def _at_once(target: Target, name: str, stem: str, agents: int, plan: Plan) -> Result:
    addresses = [f"{TENANT}.{stem}-{index}" for index in range(agents)]
    with contextlib.ExitStack() as stack:
        # A client per agent, made before the clock starts (one costs about 20 ms of CPU):
        # agents' threads that shared one, each making several calls, now and then read
        # from a connection another thread's call had closed (ReadError, bad descriptor).
        clients = [stack.enter_context(client(target)) for _ in addresses]

        def turns_of(ingress: Ingress, address: str) -> list[Span]:
            return [
                run_turn(ingress, address, turn, plan.rounds)
                for turn in range(1, plan.agent_turns + 1)
            ]

        work = [
            functools.partial(turns_of, ingress, address)
            for ingress, address in zip(clients, addresses, strict=True)
        ]

        def run() -> list[Span]:
            return all_at_once(work, addresses)

        return _measure(target, Workload(name, addresses, plan.agent_turns, plan.rounds, run))


def _measure(target: Target, work: Workload) -> Result:
    """Run the turns, wait for the projection, then check every timeline and summarise.

    CPU is counted until the projection caught up: that is work the rounds caused.
    """
    last_seq = work.turns_per_agent * events_per_turn(work.rounds)
    expected = dict.fromkeys(work.addresses, last_seq)
    before = cpu_times()
    spans = work.run()
    projected_at = wait_projected(target.projection, expected, PROJECTION_TIMEOUT)
    cpu = cpu_times() - before
    check_projected(target.projection, expected)
    with client(target) as ingress:
        timelines = [read_timeline(ingress, address) for address in work.addresses]
    for address, events in zip(work.addresses, timelines, strict=True):
        check_timeline(address, events, work.turns_per_agent, work.rounds)
    return summarize(Run(work.name, work.rounds, spans, projected_at, cpu, timelines))


def all_at_once(work: Sequence[Callable[[], list[Span]]], names: Sequence[str]) -> list[Span]:
    """One thread per agent (its turns, one after another); a barrier releases them
    together. Returns every turn's span.

    The threads are daemons and the barrier is aborted on the way out, so an interrupted
    run neither waits for turns in flight nor leaves a thread waiting at the barrier.
    """
    barrier = threading.Barrier(len(work))
    agents = [_AgentThread(name, turns, barrier) for name, turns in zip(names, work, strict=True)]
    threads = [threading.Thread(target=a.run, name=a.name, daemon=True) for a in agents]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        barrier.abort()
    return [span for agent in agents for span in agent.spans()]


@dataclass
class _AgentThread:
    name: str
    turns: Callable[[], list[Span]]
    barrier: threading.Barrier
    outcome: list[Span] | BaseException | None = None

    def run(self) -> None:
        try:
            self.barrier.wait()
            self.outcome = self.turns()
        except BaseException as error:  # noqa: BLE001 - raised in the main thread by spans()
            self.outcome = error

    def spans(self) -> list[Span]:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        if self.outcome is None:
            raise BenchError(f"{self.name}: its thread ended without a result.")
        return self.outcome
