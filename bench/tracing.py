"""`python -m bench.tracing [--turns N] [--rounds R]`: what tracing costs a round.

Two stacks under one temporary home, on the same machine at the same time, with the
scripted model and the `calculator` (no model time): one traced, its gateway-less endpoint
and its restate-server exporting every span to a real trace store (Arize Phoenix from
`.venv/trace-store`, on loopback), one with tracing off, beside which the plain Restate loop
(`bench/plain.py`) runs on the untraced restate-server. Their turns are interleaved (traced,
off, plain, then the next), so all three meet the same load. Per-round time is a turn's wall
time at the ingress client divided by its rounds, and each endpoint's CPU (its process
tree's, from /proc) from the first counted turn until the store holds every span, divided
by the rounds; the spans the store
holds after the run are counted, so a traced run that exported nothing prints no figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from bench import BenchError
from bench.baseline import plain_endpoint, plain_settings, plain_turn, start_plain
from bench.cpu import process_cpu
from bench.results import Span
from bench.rounds import TURN_TIMEOUT, run_turn
from bench.stats import Spread, spread
from services.ingress import Ingress
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.fixtures.trace_store import TraceStore, trace_store

TENANT = "bench"


@dataclass(frozen=True)
class Figures:
    turns: int
    rounds_per_turn: int
    traced: Spread
    off: Spread
    plain: Spread
    spans_exported: int
    """Spans the trace store holds of the traced stack's run (restate-server's and ours),
    counted once it holds every model call's."""
    traced_cpu_ms: float = 0.0
    """The traced endpoint's CPU a round (ms), its spans' export included."""
    off_cpu_ms: float = 0.0
    """The untraced endpoint's CPU a round (ms), likewise."""

    @property
    def tracing_cost_ms(self) -> float:
        return self.traced.median_ms - self.off.median_ms


def exported_all(store: TraceStore, model_calls: int) -> int | None:
    """How many spans the store holds, once it holds every model call's."""
    spans = store.spans()
    made = sum(span.name.startswith("chat ") for span in spans)
    return len(spans) if made >= model_calls else None


def per_round(spans: Sequence[Span], rounds: int) -> Spread:
    return spread([span.seconds * 1000 / rounds for span in spans])


@contextmanager
def stacks(home: Path, store: TraceStore) -> Iterator[tuple[Stack, Stack]]:
    traced = isolated_settings(
        home / "traced", otlp_endpoint=store.http_url, restate_tracing_endpoint=store.grpc_url
    )
    off = isolated_settings(home / "off")
    with Stack(traced, gateway=False) as on_stack, Stack(off, gateway=False) as off_stack:
        twin = plain_endpoint(plain_settings(off))
        start_plain(twin)
        try:
            yield on_stack, off_stack
        finally:
            twin.stop()


def endpoint_cpu(stack: Stack) -> float:
    pid = stack.endpoint.pid
    return process_cpu(pid) if pid is not None else 0.0


def measure(home: Path, turns: int, rounds: int) -> Figures:
    (home / "phoenix").mkdir(parents=True)
    with trace_store(home / "phoenix") as store, stacks(home, store) as (on_stack, off_stack):
        traced, off = on_stack.settings, off_stack.settings
        spans: dict[str, list[Span]] = {"traced": [], "off": [], "plain": []}
        cpu: dict[str, float] = {}
        with (
            closing(Ingress(traced.ingress_url, timeout=TURN_TIMEOUT)) as on_ingress,
            closing(Ingress(off.ingress_url, timeout=TURN_TIMEOUT)) as off_ingress,
            httpx.Client(base_url=off.ingress_url, timeout=TURN_TIMEOUT) as plain,
        ):
            for turn in range(turns + 1):  # turn 0 warms every path up, and is not counted
                times = (
                    run_turn(on_ingress, f"{TENANT}.traced", turn + 1, rounds),
                    run_turn(off_ingress, f"{TENANT}.off", turn + 1, rounds),
                    plain_turn(plain, f"{TENANT}.plain", turn + 1, rounds),
                )
                if turn:
                    for name, span in zip(spans, times, strict=True):
                        spans[name].append(span)
                else:
                    cpu = {"traced": -endpoint_cpu(on_stack), "off": -endpoint_cpu(off_stack)}
        exported = eventually(
            lambda: exported_all(store, (turns + 1) * rounds), 120, "every model span in the store"
        )
        # Read once the spans are out, so the CPU of their export counts.
        cpu["traced"] += endpoint_cpu(on_stack)
        cpu["off"] += endpoint_cpu(off_stack)
    return Figures(
        turns,
        rounds,
        per_round(spans["traced"], rounds),
        per_round(spans["off"], rounds),
        per_round(spans["plain"], rounds),
        exported,
        cpu["traced"] * 1000 / (turns * rounds),
        cpu["off"] * 1000 / (turns * rounds),
    )


def report(figures: Figures) -> str:
    rows = [
        ("teaspill, tracing on (exporting)", figures.traced),
        ("teaspill, tracing off", figures.off),
        ("plain Restate loop", figures.plain),
    ]
    lines = [
        f"{figures.turns} turns of {figures.rounds_per_turn} rounds each, interleaved",
        f"{'':34} {'median ms/round':>16} {'p95 ms/round':>13}",
    ]
    lines += [f"{name:34} {s.median_ms:16.2f} {s.p95_ms:13.2f}" for name, s in rows]
    lines.append(f"tracing's cost: {figures.tracing_cost_ms:+.2f} ms a round (median)")
    lines.append(
        f"endpoint CPU a round: {figures.traced_cpu_ms:.2f} ms traced, "
        f"{figures.off_cpu_ms:.2f} ms off"
    )
    lines.append(f"spans in the trace store: {figures.spans_exported}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__)
    parser.add_argument("--turns", type=int, default=30, help="turns per variant (30)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per turn (3)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as home:
        try:
            figures = measure(Path(home), args.turns, args.rounds)
        except (BenchError, AssertionError) as error:
            print(f"bench.tracing: {error}", file=sys.stderr)
            return 1
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
