"""`python -m bench.compose [--runs N]`: what a composition costs against the same stages
driven by hand from a client.

A stack without the gateway, under a temporary home, the scripted model (each stage
answers `You said: <its input>` at once, so what is measured is the platform's own cost).
Each run, on new agents, times four cases, interleaved:

- `sequential`: a 3-stage sequential composition, from the send to the composing agent's
  `turn_ended` (read from its timeline through ingress, every 5 ms);
- `sequential by hand`: the client sends the first stage's kind the message, waits for
  its reply (the wake's answer), sends it to the second stage, and so on;
- `parallel` and `parallel by hand`: a 5-way parallel (concatenated), against five
  messages sent at once from five threads, whose replies the client joins.

Every reply is checked against what the stages must answer, or no figures are printed.
After the timed runs, one more run of each case with journals kept counts what Restate made
for it, from the send until every invocation had finished: invocations, journal entries
and bytes (the benchmark's own timeline reads left out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from bench import BenchError
from schemas.compose import Branch, Composition, Parallel, Sequential
from schemas.events import TurnEnded
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.contracts import PUBLISH
from services.ingress import Ingress
from services.stack import Stack, isolated_settings
from services.stack.journal import RestateAdmin

TENANT = "bench"
STAGES = ("stage-a", "stage-b", "stage-c")
BRANCHES = 5
TEXT = "hello"
POLL = 0.005
TIMEOUT = 120.0


def composing(kind: str, composition: Composition) -> AgentSpec:
    return AgentSpec(kind, "Compose.", model="script", composition=composition)


SEQUENTIAL = composing("bench-sequential", Sequential(STAGES))
PARALLEL = composing(
    "bench-parallel", Parallel(tuple(Branch(STAGES[0]) for _ in range(BRANCHES)), separator="\n")
)
EXPECTED = {
    "sequential": "You said: " * len(STAGES) + TEXT,
    "parallel": "\n".join([f"You said: {TEXT}"] * BRANCHES),
}


def ended(ingress: Ingress, address: str) -> TurnEnded:
    """The composing agent's turn_ended, read as soon as it is on its timeline."""
    deadline, seen = time.monotonic() + TIMEOUT, 0
    while time.monotonic() < deadline:
        page = ingress.timeline(address, after_seq=seen, limit=100)
        for event in page.events:
            if isinstance(event.body, TurnEnded):
                return event.body
        seen = page.events[-1].seq if page.events else seen
        time.sleep(POLL)
    raise BenchError(f"{address}'s composition did not end within {TIMEOUT:g} s")


def composed(ingress: Ingress, address: str, spec: AgentSpec) -> str:
    ingress.send_wake(address, Message(TEXT, kind=spec.kind))
    end = ended(ingress, address)
    if end.outcome != "succeeded":
        raise BenchError(f"{address}'s composition ended {end.outcome}: {end.reason}")
    return end.reply


def by_hand_sequential(ingress: Ingress, address: str) -> str:
    text = TEXT
    for index, kind in enumerate(STAGES):
        text = ingress.wake(f"{address}.s{index}", Message(text, kind=kind)).reply
    return text


def by_hand_parallel(ingress: Ingress, address: str, pool: ThreadPoolExecutor) -> str:
    def one(index: int) -> str:
        with closing(Ingress(ingress.url)) as own:
            return own.wake(f"{address}.b{index}", Message(TEXT, kind=STAGES[0])).reply

    return "\n".join(pool.map(one, range(BRANCHES)))


def timed(case: str, run: Callable[[], str]) -> float:
    began = time.perf_counter()
    reply = run()
    ms = (time.perf_counter() - began) * 1000
    expected = EXPECTED[case.removesuffix(" by hand")]
    if reply != expected:
        raise BenchError(f"{case} answered {reply!r}, not {expected!r}")
    return ms


def cases(ingress: Ingress, n: int, pool: ThreadPoolExecutor) -> dict[str, Callable[[], str]]:
    """The four cases of run `n`, each on agents of its own."""
    return {
        "sequential": lambda: composed(ingress, f"{TENANT}.seq-{n + 1}", SEQUENTIAL),
        "sequential by hand": lambda: by_hand_sequential(ingress, f"{TENANT}.hs-{n + 1}"),
        "parallel": lambda: composed(ingress, f"{TENANT}.par-{n + 1}", PARALLEL),
        "parallel by hand": lambda: by_hand_parallel(ingress, f"{TENANT}.hp-{n + 1}", pool),
    }


def measure(ingress: Ingress, runs: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    with ThreadPoolExecutor(BRANCHES) as pool:
        for run in range(runs + 1):  # run 0 warms the stack up and is not counted
            for case, go in cases(ingress, run, pool).items():
                ms = timed(case, go)
                if run:
                    found.setdefault(case, []).append(ms)
    return found


def cost(ingress: Ingress, admin: RestateAdmin) -> dict[str, tuple[int, int, int]]:
    """Invocations, journal entries and bytes of one more run of each case."""
    admin.retain_journals(admin.services())
    found: dict[str, tuple[int, int, int]] = {}
    with ThreadPoolExecutor(BRANCHES) as pool:
        for case, go in cases(ingress, -1, pool).items():
            before = {invocation.id for invocation in admin.invocations()}
            timed(case, go)
            made = [i for i in admin.finished_since(before) if i.target_handler_name != "timeline"]
            journals = admin.journals([i.id for i in made])
            entries = sum(j.size.entries for j in journals)
            found[case] = (len(made), entries, sum(j.size.bytes for j in journals))
    return found


def render_cost(found: dict[str, tuple[int, int, int]]) -> str:
    lines = ["| case | invocations | journal entries | journal bytes |", "|---|---|---|---|"]
    lines += [
        f"| {case} | {n} | {entries} | {size:,} |" for case, (n, entries, size) in found.items()
    ]
    return "\n".join(lines)


def render(found: dict[str, list[float]], runs: int) -> str:
    lines = [
        f"{runs} runs of each, interleaved; ms from the send to the reply",
        "| case | p50 | p90 | composed / by hand (p50) |",
        "|---|---|---|---|",
    ]
    for case, times in found.items():
        p50 = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
        ratio = ""
        if not case.endswith("by hand"):
            ratio = f"{p50 / statistics.median(found[f'{case} by hand']):.2f}"
        lines.append(f"| {case} | {p50:.0f} | {p90:.0f} | {ratio} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compose", description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="runs of each case (10)")
    parser.add_argument("--json", type=Path, help="also write the times here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-") as home:
        settings = isolated_settings(Path(home), live_token="", observer_modules=())
        try:
            with Stack(settings, gateway=False), closing(Ingress(settings.ingress_url)) as ingress:
                for kind in STAGES:
                    stage = AgentSpec(kind, f"You are {kind}.", model="script")
                    ingress.call(PUBLISH, stage, TENANT)
                for spec in (SEQUENTIAL, PARALLEL):
                    ingress.call(PUBLISH, spec, TENANT)
                found = measure(ingress, args.runs)
                with RestateAdmin(settings.admin_url) as admin:
                    spent = cost(ingress, admin)
        except BenchError as error:
            print(f"bench.compose: {error}", file=sys.stderr)
            return 1
    print(render(found, args.runs))
    print(render_cost(spent))
    if args.json:
        args.json.write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
