"""`python -m bench [BENCHMARK ...]`: start a stack in a temporary home, measure, stop it.

Exit status: 0 with figures, 1 when the stack or a run failed (no figures are printed
then), 2 for bad arguments, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from bench import BenchError
from bench.baseline import (
    PlainResult,
    plain_concurrent,
    plain_crowded,
    plain_endpoint,
    plain_first_turns,
    plain_sequential,
    plain_settings,
    plain_warm_up,
    start_plain,
)
from bench.journal import JournalCost, journal
from bench.projection import projection_path
from bench.report import machine, render
from bench.results import Result
from bench.rounds import (
    TURN_TIMEOUT,
    Plan,
    Target,
    concurrent,
    crowded,
    first_turns,
    sequential,
    warm_up,
)
from bench.sse import SseResult, sse, sse_plan
from bench.sse import render as render_sse
from bench.versus import compare, plain_table
from bench.versus import render as render_versus
from services.ingress import IngressError
from services.projection.notify import RETRY_AFTER
from services.settings import Settings
from services.stack import (
    Endpoint,
    Gateway,
    RestateServer,
    StackError,
    isolated_settings,
    register,
)
from services.stack.journal import JournalError

BENCHMARKS: dict[str, Callable[[Target, Plan], Result]] = {
    "sequential": sequential,
    "first-turns": first_turns,
    "concurrent": concurrent,
    "crowded": crowded,
}
PLAIN: dict[str, Callable[[str, Plan], PlainResult]] = {
    "plain-sequential": plain_sequential,
    "plain-first-turns": plain_first_turns,
    "plain-concurrent": plain_concurrent,
    "plain-crowded": plain_crowded,
}
"""The same workloads on the plain loop (`bench/plain.py`), for the comparison."""
JOURNAL = "journal"
"""Invocations, journal entries and bytes of one turn, teaspill's and the plain loop's."""
VERSUS = "versus"
"""teaspill beside the plain loop: each round benchmark and its plain twin, then `journal`."""
VERSUS_NAMES = [
    "sequential",
    "plain-sequential",
    "concurrent",
    "plain-concurrent",
    "crowded",
    "plain-crowded",
    JOURNAL,
]
NEW_AGENTS = "new-agents"
"""A new agent's first turn beside the plain loop's: `first-turns`, then its plain twin."""
COMPOSITES = {
    VERSUS: VERSUS_NAMES,
    NEW_AGENTS: ["first-turns", "plain-first-turns"],
}
SSE, SSE_LOAD = "sse", "sse-load"
"""Followers of timelines through the gateway (`bench/sse.py`): latency and catch-up; and
latency with 10 agents followed at once while they all run (not in the default run)."""
NAMES = [*BENCHMARKS, *PLAIN, JOURNAL, SSE, SSE_LOAD, VERSUS, NEW_AGENTS]
DEFAULT = [VERSUS, SSE]
FULL = Plan(agents=50, turns=20, rounds=10, crowd=200, agent_turns=3)
QUICK = Plan(agents=5, turns=3, rounds=3, crowd=10, agent_turns=1)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Measure the overhead of an agent's round on a real restate-server, and"
        " how fast timelines reach followers through the gateway.",
    )
    names = ", ".join(NAMES)
    parser.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK",
        help=f"any of: {names} (default: {', '.join(DEFAULT)})",
    )
    parser.add_argument("--agents", type=_positive, help=f"concurrent agents ({FULL.agents})")
    parser.add_argument("--crowd", type=_positive, help=f"crowded agents ({FULL.crowd})")
    parser.add_argument("--rounds", type=_positive, help=f"rounds per turn ({FULL.rounds})")
    parser.add_argument(
        "--agent-turns",
        type=_positive,
        help=f"turns each concurrent or crowded agent runs, one after another ({FULL.agent_turns})",
    )
    parser.add_argument(
        "--turns",
        type=_positive,
        help=f"sequential turns, and turns per followed agent ({FULL.turns})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK.agents} agents ({QUICK.crowd} crowded),"
        f" {QUICK.turns} turns of {QUICK.rounds} rounds",
    )
    parser.add_argument(
        "--repeat",
        type=_positive,
        default=1,
        help="run the round benchmarks and their plain twins this many times, in pairs;"
        " the comparison takes medians (1)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results here")
    parser.add_argument(
        "--keep-home", action="store_true", help="keep the temporary home (logs, Restate data)"
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.benchmarks if name not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {names}")
    return args


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def plan_of(args: argparse.Namespace) -> Plan:
    """`--quick` sets smaller defaults; explicit numbers win over either."""
    base = QUICK if args.quick else FULL
    return Plan(
        agents=args.agents or base.agents,
        turns=args.turns or base.turns,
        rounds=args.rounds or base.rounds,
        crowd=args.crowd or base.crowd,
        agent_turns=args.agent_turns or base.agent_turns,
    )


def expand(names: Sequence[str]) -> list[str]:
    """`versus` and `new-agents` stand for their benchmarks; each runs once, `journal`
    after the other round benchmarks (it makes Restate keep journals from then on) and the
    SSE ones last."""
    wanted = [n for name in names for n in COMPOSITES.get(name, [name])]
    unique = list(dict.fromkeys(wanted))
    rank = {JOURNAL: 1, SSE: 2, SSE_LOAD: 2}
    return sorted(unique, key=lambda name: rank.get(name, 0))


def bench_settings(home: Path) -> Settings:
    return isolated_settings(
        home,
        # What is measured is restate-server and the endpoint (and the gateway for `sse`
        # alone): no live deltas, no observers, whatever the caller's environment says;
        # the projector tells the gateway of new events, as in `teaspill up`.
        live_token="",
        notify_token=secrets.token_urlsafe(16),
        observer_modules=(),
        # The followers share one read key: the per-key limits (`bench.gateway` measures
        # their cost) would refuse them past a handful of streams.
        key_rate=0.0,
        key_streams=10_000,
    )


@contextlib.contextmanager
def bench_home(keep: bool) -> Iterator[Path]:
    if keep:
        home = Path(tempfile.mkdtemp(prefix="teaspill-bench-"))
        try:
            yield home
        finally:
            print(f"bench: the home is kept in {home}", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-") as home_dir:
        yield Path(home_dir)


@contextlib.contextmanager
def running(settings: Settings, *, plain: bool) -> Iterator[None]:
    """restate-server and the endpoint (and the plain loop's, if `plain`), registered, for
    the block; always stopped after it.

    Only the parts under measurement are started (no gateway). Restate is stopped first:
    with turns still in flight (an interrupted run), an endpoint stopped first does not
    exit within 30 s, as Restate keeps its streams open, and is killed; stopping Restate
    first closes those streams, and the endpoints stop on SIGTERM.
    """
    restate, endpoint = RestateServer(settings), Endpoint(settings)
    twin = plain_endpoint(plain_settings(settings)) if plain else None
    try:
        restate.start()
        endpoint.start()
        register(settings)
        if twin is not None:
            start_plain(twin)
        yield
    finally:
        with _shielded():
            try:
                restate.stop()
            finally:
                try:
                    endpoint.stop()
                finally:
                    if twin is not None:
                        twin.stop()


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """A second Ctrl-C must not cut the teardown short and leave the parts running."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def gateway(settings: Settings) -> Iterator[str]:
    """The gateway on the running stack, for the block; yields its URL. Started only for
    `sse`, after the round benchmarks, so that those measure the stack without it."""
    part = Gateway(settings)
    try:
        part.start()
        # The endpoint's notices of the warm-up found no gateway, and its notifier tries a
        # gateway that did not answer again only RETRY_AFTER seconds later: until then
        # followers get events at the gateway's poll interval, not as a running gateway
        # gives them. Measure from when the notices flow.
        time.sleep(RETRY_AFTER + 0.5)
        yield part.url
    finally:
        with _shielded():
            part.stop()


@dataclasses.dataclass(frozen=True)
class Results:
    rounds: list[Result]
    plain: list[PlainResult]
    journal: list[JournalCost]
    sse: SseResult | None


def run(names: Sequence[str], plan: Plan, home: Path, quick: bool, repeat: int = 1) -> Results:
    """Start the stack, warm it up, run each benchmark (the round ones and their plain
    twins `repeat` times over); the stack is always stopped."""
    settings = bench_settings(home)
    target = Target(settings.ingress_url, projection_path(settings.home))
    twin = any(name in PLAIN or name == JOURNAL for name in names)
    rounds: list[Result] = []
    plain: list[PlainResult] = []
    with running(settings, plain=twin):
        warm_up(target, plan)
        if twin:
            plain_warm_up(target.url, plan)
        for again in range(repeat):
            this = dataclasses.replace(plan, run=again)
            for name in names:
                if name in BENCHMARKS:
                    rounds.append(BENCHMARKS[name](target, this))
                elif name in PLAIN:
                    plain.append(PLAIN[name](target.url, this))
        costs = journal(target, settings.admin_url, plan) if JOURNAL in names else []
        followed = [name == SSE_LOAD for name in names if name in (SSE, SSE_LOAD)]
        if not followed:
            return Results(rounds, plain, costs, None)
        with gateway(settings) as url:
            parts = [sse(target, url, sse_plan(plan, quick), load) for load in followed]
        return Results(rounds, plain, costs, combined(parts))


def combined(parts: Sequence[SseResult]) -> SseResult:
    built = next((part.built for part in parts if part.built is not None), None)
    latency = [row for part in parts for row in part.latency]
    return SseResult(latency, built, [row for part in parts for row in part.catch_up])


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM stops the run as Ctrl-C does, so the stack is taken down on the way out."""
    raise KeyboardInterrupt


def _sentence(error: Exception) -> str:
    if isinstance(error, httpx.TimeoutException):
        return (
            f"a call to Restate ingress took longer than {TURN_TIMEOUT:g} s; run again with"
            " --keep-home and read logs/restate.log and logs/endpoint.log in the home."
        )
    if isinstance(error, httpx.HTTPError):
        return f"a call to Restate ingress failed: {error!r}."
    return str(error)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = expand(args.benchmarks or DEFAULT)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with bench_home(args.keep_home) as home:
            results = run(names, plan_of(args), home, args.quick, args.repeat)
    except KeyboardInterrupt:
        print("bench: interrupted; the stack was stopped.", file=sys.stderr)
        return 130
    except (BenchError, StackError, IngressError, JournalError, httpx.HTTPError) as error:
        print(f"bench: no figures, the run failed: {_sentence(error)}", file=sys.stderr)
        return 1
    about = machine()
    print(report(results, about))
    if args.json is not None:
        try:
            write_json(args.json, results, about)
        except OSError as error:
            print(f"bench: could not write {args.json}: {error.strerror}.", file=sys.stderr)
            return 1
    return 0


def report(results: Results, about: dict[str, Any]) -> str:
    parts = [render(results.rounds, about)] if results.rounds else []
    if results.plain:
        parts.append(plain_table(results.plain))
    rows = compare(results.rounds, results.plain, results.journal)
    if rows or results.journal:
        parts.append(render_versus(rows, results.journal))
    if results.sse is not None:
        parts.append(render_sse(results.sse, about))
    return "\n\n".join(parts)


def write_json(path: Path, results: Results, about: dict[str, Any]) -> None:
    """`results` (teaspill's round benchmarks) as `bench.report` writes them; the plain
    loop's, the journal costs, the comparison and `sse` beside them."""
    document: dict[str, Any] = {
        "machine": about,
        "results": [dataclasses.asdict(r) for r in results.rounds],
        "plain": [dataclasses.asdict(r) for r in results.plain],
        "journal": [dataclasses.asdict(c) for c in results.journal],
        "versus": [
            {**dataclasses.asdict(row), "ratio": row.ratio}
            for row in compare(results.rounds, results.plain, results.journal)
        ],
    }
    if results.sse is not None:
        document["sse"] = dataclasses.asdict(results.sse)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
