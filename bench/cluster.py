"""`python -m bench.cluster [--agents N] [--repeat K] [--lag-turns T] [--failovers F]`: the
cluster layout (three Restate nodes, two endpoint replicas behind HAProxy, the projection
on PostgreSQL) against the single-node default (SQLite), on the scripted model.

- rounds: N agents at once, each running turns of calculator rounds one after another, K
  times on new agents; rounds/s over the whole run and each turn's ms per round;
- lag: one agent's turns one after another while a reader polls the projection store
  every 5 ms; per event, from its own time (the journaled step that made it, on the
  Restate context's clock) to the moment the reader first saw it; SQLite (the single
  node), PostgreSQL (the single node on a PostgreSQL of its own) and the cluster's;
- failover: agents in long turns of short rounds, then SIGKILL of a Restate node, or of an
  endpoint replica; per agent, from the kill to its next step (its first event stamped
  after it); the part is started again before the next sample.

Every timeline is read back from Restate and checked (seq 1..n, the shape the script asks
for, every turn succeeded), and the store's copy too, before any figure is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import psycopg

from bench import BenchError
from bench.report import machine
from bench.results import Span
from bench.rounds import all_at_once, bench_spec, reply_text, run_turn
from bench.timeline import check_timeline, events_per_turn, read_timeline
from schemas.events import Event
from schemas.wake import Message
from services.executor.scripted import script
from services.ingress import Ingress, IngressError
from services.projection.stores import open_store
from services.settings import Settings
from services.stack import Stack, isolated_settings
from services.stack.cluster import Cluster, Layout
from services.stack.postgres import Postgres
from services.stack.process import Part, StackError, free_port

TENANT = "bench"
PARTS = ("rounds", "lag", "failover")
SQLITE, CLUSTER = "single node, SQLite", "cluster, PostgreSQL"
POLL = 0.005
"""Seconds between the lag reader's reads of the store."""
FAILOVER_SLEEP = 0.25
PATIENCE = 60.0
"""Seconds a call through ingress is asked again while a failover answers 5xx or cuts it."""


@dataclass(frozen=True)
class Sizes:
    agents: int = 50
    turns: int = 2
    """Turns each agent of the rounds benchmark runs, one after another."""
    rounds: int = 3
    repeat: int = 3
    lag_turns: int = 10
    failovers: int = 3
    """Samples of each kill."""
    failover_agents: int = 6
    failover_rounds: int = 12
    """Rounds of each failover turn, each with a model step of `FAILOVER_SLEEP` seconds:
    about 3 s of turn, and the kill lands in its first rounds."""


@dataclass
class Found:
    """Everything one run measured, by layout."""

    rounds: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    lag_ms: dict[str, list[float]] = field(default_factory=dict)
    failover: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class PatientIngress(Ingress):
    """Asks again, for up to `PATIENCE` seconds, while ingress answers 5xx or the proxy
    cuts the call (a node that led a partition was lost): the benchmark's calls are reads,
    turns of agents it made, and sends with an idempotency key."""

    def _post(
        self, path: str, body: bytes, idempotency_key: str | None, patience: float | None = None
    ) -> bytes:
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                return super()._post(path, body, idempotency_key, patience)
            except IngressError as error:
                if error.status < httpx.codes.INTERNAL_SERVER_ERROR or time.monotonic() > deadline:
                    raise
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


def ingress(settings: Settings) -> contextlib.closing[PatientIngress]:
    return contextlib.closing(PatientIngress(settings.ingress_url, timeout=300.0))


def bench_settings(home: Path, **overrides: Any) -> Settings:
    return isolated_settings(home, live_token="", observer_modules=(), **overrides)


async def _last_seqs(settings: Settings, addresses: Sequence[str]) -> dict[str, int]:
    async with await open_store(settings.projection_url, settings.home, readonly=True) as store:
        rows = {address: await store.agent(address) for address in addresses}
    return {address: row.last_seq if row else 0 for address, row in rows.items()}


def wait_projected(settings: Settings, expected: dict[str, int], timeout: float = 300.0) -> None:
    """Until the store holds every agent's expected last seq."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(sqlite3.OperationalError, psycopg.OperationalError):
            # the store not made yet, or restarting
            seqs = asyncio.run(_last_seqs(settings, list(expected)))
            if all(seqs[a] >= last for a, last in expected.items()):
                return
        if time.monotonic() > deadline:
            raise BenchError(f"the projection did not catch up within {timeout:g} s.")
        time.sleep(0.05)


def checked(
    settings: Settings, addresses: Sequence[str], turns: int, rounds: int
) -> list[list[Event]]:
    """Every agent's timeline from Restate, checked, once the store holds it whole."""
    wait_projected(settings, dict.fromkeys(addresses, turns * events_per_turn(rounds)))
    with ingress(settings) as client:
        timelines = [read_timeline(client, address) for address in addresses]
    for address, events in zip(addresses, timelines, strict=True):
        check_timeline(address, events, turns, rounds)
    return timelines


def rounds_of(settings: Settings, sizes: Sizes, label: str) -> list[dict[str, float]]:
    """The rounds benchmark, `sizes.repeat` times on new agents."""
    runs = []
    with ingress(settings) as warm:  # first calls pay for connections and imports
        run_turn(warm, f"{TENANT}.{label}-warm-up", 1, sizes.rounds)
    for run in range(sizes.repeat):
        addresses = [f"{TENANT}.{label}-r{run}-{n}" for n in range(sizes.agents)]
        with contextlib.ExitStack() as stack:
            clients = [stack.enter_context(ingress(settings)) for _ in addresses]

            def turns_of(client: Ingress, address: str) -> list[Span]:
                return [
                    run_turn(client, address, t, sizes.rounds) for t in range(1, sizes.turns + 1)
                ]

            work = [
                functools.partial(turns_of, c, a) for c, a in zip(clients, addresses, strict=True)
            ]
            spans = all_at_once(work, addresses)
        checked(settings, addresses, sizes.turns, sizes.rounds)
        wall = max(s.ended for s in spans) - min(s.started for s in spans)
        per_round = [s.seconds * 1000 / sizes.rounds for s in spans]
        runs.append(
            {
                "rounds_per_s": len(spans) * sizes.rounds / wall,
                "round_ms_p50": statistics.median(per_round),
                "round_ms_max": max(per_round),
            }
        )
    return runs


def lag_of(settings: Settings, sizes: Sizes, label: str) -> list[float]:
    """Milliseconds from each event's own time to a polling reader's first sight of it."""
    address = f"{TENANT}.{label}-lag"
    last = sizes.lag_turns * events_per_turn(sizes.rounds)
    seen: dict[int, float] = {}
    reader = threading.Thread(target=asyncio.run, args=(_watch(settings, address, last, seen),))
    with ingress(settings) as client:
        run_turn(client, f"{TENANT}.{label}-lag-warm-up", 1, sizes.rounds)  # the store is made
        reader.start()
        for turn in range(1, sizes.lag_turns + 1):
            run_turn(client, address, turn, sizes.rounds)
    reader.join(120)
    if reader.is_alive() or len(seen) != last:
        raise BenchError(f"{address}: the reader saw {len(seen)} of {last} events.")
    (events,) = checked(settings, [address], sizes.lag_turns, sizes.rounds)
    return [(seen[e.seq] - e.at.timestamp()) * 1000 for e in events]


async def _watch(settings: Settings, address: str, last: int, seen: dict[int, float]) -> None:
    deadline = time.monotonic() + 300
    async with await open_store(settings.projection_url, settings.home, readonly=True) as store:
        after = 0
        while after < last and time.monotonic() < deadline:
            page = await store.timeline(address, after, 100)
            now = time.time()  # noqa: TID251 - the wall clock the events' times are on
            for event in page:
                seen[event.seq] = now
                after = event.seq
            if not page:
                await asyncio.sleep(POLL)


def long_turn(rounds: int) -> str:
    """`turn_script`'s first turn, each calculator round's model step `FAILOVER_SLEEP` long."""
    lines = [
        {
            "sleep": FAILOVER_SLEEP,
            "calls": [{"name": "calculator", "arguments": {"expression": f"1*{n}"}}],
        }
        for n in range(1, rounds)
    ]
    return script(*lines, {"reply": reply_text(1)})


def failover_of(cluster: Cluster, sizes: Sizes, part: Part, sample: str) -> dict[str, Any]:
    """Agents in long turns, SIGKILL of `part` once each has begun, and per agent the
    seconds from the kill to its first step after it; `part` is started again."""
    settings = cluster.settings
    addresses = [f"{TENANT}.fail-{sample}-{n}" for n in range(sizes.failover_agents)]
    spec = bench_spec(sizes.failover_rounds)
    with ingress(settings) as client:
        for address in addresses:
            wake = Message(long_turn(sizes.failover_rounds), spec=spec)
            client.send_wake(address, wake, idempotency_key=f"{address}-1")
    wait_projected(settings, dict.fromkeys(addresses, 4), 120)
    killed = time.time()  # noqa: TID251 - the wall clock the events' times are on
    part.kill()
    # Every turn ends with the part still down: the layout goes on without it.
    timelines = checked(settings, addresses, 1, sizes.failover_rounds)
    part.start(120)
    gaps = [_next_step(events, killed) for events in timelines]
    return {"part": part.name, "max_s": max(gaps), "p50_s": statistics.median(gaps)}


def _next_step(events: Sequence[Event], killed: float) -> float:
    after = [e.at.timestamp() for e in events if e.at.timestamp() > killed]
    if not after:
        raise BenchError(f"{events[0].agent}: its turn ended before the kill.")
    return min(after) - killed


@contextlib.contextmanager
def single(home: Path, postgres: bool) -> Iterator[Settings]:
    """The single-node stack without its gateway, on SQLite or on a PostgreSQL of its own."""
    settings = bench_settings(home)
    with contextlib.ExitStack() as stack:
        if postgres:
            server = Postgres(settings, free_port())
            server.start()
            stack.callback(server.stop)
            settings = settings.model_copy(update={"projection_url": server.url})
        stack.enter_context(Stack(settings, gateway=False))
        yield settings


def say(text: str) -> None:
    print(f"bench.cluster: {text}", file=sys.stderr, flush=True)


def measure(sizes: Sizes, parts: Sequence[str]) -> Found:
    found = Found()
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-cluster-") as tmp:
        if "rounds" in parts or "lag" in parts:
            say("the single node on SQLite")
            with single(Path(tmp) / "single", postgres=False) as settings:
                if "rounds" in parts:
                    found.rounds[SQLITE] = rounds_of(settings, sizes, "single")
                if "lag" in parts:
                    found.lag_ms[SQLITE] = lag_of(settings, sizes, "single")
        if "lag" in parts:
            say("the single node on PostgreSQL")
            with single(Path(tmp) / "single-pg", postgres=True) as settings:
                found.lag_ms["single node, PostgreSQL"] = lag_of(settings, sizes, "single-pg")
        say("the cluster layout")
        settings = bench_settings(Path(tmp) / "cluster")
        with Cluster(settings, Layout.free(settings), gateways=False) as cluster:
            if "rounds" in parts:
                found.rounds[CLUSTER] = rounds_of(cluster.settings, sizes, "cluster")
            if "lag" in parts:
                found.lag_ms[CLUSTER] = lag_of(cluster.settings, sizes, "cluster")
            if "failover" in parts:
                found.failover = failovers(cluster, sizes)
    return found


def failovers(cluster: Cluster, sizes: Sizes) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {"restate node": [], "endpoint replica": []}
    for n in range(sizes.failovers):
        node = cluster.nodes[n % len(cluster.nodes)]
        say(f"failover {n + 1} of {sizes.failovers}: {node.name}, then an endpoint replica")
        found["restate node"].append(failover_of(cluster, sizes, node, f"node-{n}"))
        replica = cluster.endpoints[n % len(cluster.endpoints)]
        found["endpoint replica"].append(failover_of(cluster, sizes, replica, f"replica-{n}"))
    return found


def _p50_max(values: Sequence[float], digits: int = 0) -> str:
    return f"{statistics.median(values):.{digits}f} / {max(values):.{digits}f}"


def render(found: Found, sizes: Sizes) -> str:
    parts = [
        _rounds_table(found, sizes) if found.rounds else "",
        _lag_table(found, sizes) if found.lag_ms else "",
        _failover_table(found, sizes) if found.failover else "",
    ]
    return "\n\n".join(part for part in parts if part)


def _rounds_table(found: Found, sizes: Sizes) -> str:
    lines = [
        f"rounds: {sizes.agents} agents at once, {sizes.turns} turns of {sizes.rounds} "
        f"rounds each, {sizes.repeat} runs",
        "| layout | rounds/s (p50 / max of runs) | ms per round (p50 of turns, per run) |",
        "|---|---|---|",
    ]
    for layout, runs in found.rounds.items():
        medians = ", ".join(f"{r['round_ms_p50']:.0f}" for r in runs)
        rates = _p50_max([r["rounds_per_s"] for r in runs], 1)
        lines.append(f"| {layout} | {rates} | {medians} |")
    return "\n".join(lines)


def _lag_table(found: Found, sizes: Sizes) -> str:
    events = sizes.lag_turns * events_per_turn(sizes.rounds)
    lines = [
        f"lag: {sizes.lag_turns} turns of {sizes.rounds} rounds, {events} events",
        "| store | event → visible, ms (p50 / max) |",
        "|---|---|",
    ]
    lines += [f"| {store} | {_p50_max(lag, 1)} |" for store, lag in found.lag_ms.items()]
    return "\n".join(lines)


def _failover_table(found: Found, sizes: Sizes) -> str:
    lines = [
        f"failover: {sizes.failover_agents} agents in turns of {sizes.failover_rounds} rounds",
        "| SIGKILL of | kill → slowest agent's next step, s (p50 / max of samples) "
        "| each sample: part, slowest, p50 of agents |",
        "|---|---|---|",
    ]
    for kind, samples in found.failover.items():
        each = ", ".join(f"{s['part']} {s['max_s']:.1f} {s['p50_s']:.1f}" for s in samples)
        lines.append(f"| {kind} | {_p50_max([s['max_s'] for s in samples], 1)} | {each} |")
    return "\n".join(lines)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__)
    parser.add_argument("parts", nargs="*", metavar="PART", help=f"any of {', '.join(PARTS)} (all)")
    parser.add_argument("--agents", type=int, default=Sizes.agents, help="agents at once (50)")
    parser.add_argument(
        "--repeat", type=int, default=Sizes.repeat, help="runs of the rounds benchmark (3)"
    )
    parser.add_argument(
        "--lag-turns", type=int, default=Sizes.lag_turns, help="turns the lag reader watches (10)"
    )
    parser.add_argument(
        "--failovers", type=int, default=Sizes.failovers, help="samples of each kill (3)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if unknown := sorted(set(args.parts) - set(PARTS)):
        parser.error(f"unknown parts {unknown}: choose from {', '.join(PARTS)}")
    sizes = Sizes(
        agents=args.agents, repeat=args.repeat, lag_turns=args.lag_turns, failovers=args.failovers
    )
    # SIGTERM stops the run as Ctrl-C does, so each stack is taken down on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        found = measure(sizes, args.parts or PARTS)
    except KeyboardInterrupt:
        say("interrupted; the stacks were stopped.")
        return 130
    except (BenchError, StackError, IngressError, httpx.HTTPError) as error:
        say(f"no figures, the run failed: {error}")
        return 1
    print(render(found, sizes))
    print(f"\n{time.monotonic() - started:.0f} s; {machine()}")
    if args.json:
        args.json.write_text(
            json.dumps({"sizes": asdict(sizes), **asdict(found), "machine": machine()}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
