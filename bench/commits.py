"""`python -m bench.commits`: what one projection commit costs, in this process.

A sequential agent's round hands the projection two batches (the model's reply, then the
tool's result), each its own transaction when nothing else is queued; with many agents
at once their batches share transactions. This writes calculator rounds of one agent
commit by commit, then of 50 agents a round at a time, through `Projection.write` on a
file in a temporary directory (or, with `--url`, into a PostgreSQL projection), and prints
CPU and wall milliseconds per commit (the process's CPU: the event loop and SQLite's
thread; PostgreSQL's server is another process, so only wall time holds its work). No
stack.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from schemas.chat import ToolCall
from schemas.events import Event, ModelMessage, ToolCalled, ToolFinished
from schemas.projection import EventBatch
from services.projection.projector import Projection
from services.projection.stores import is_postgres

START = datetime(2026, 1, 1, tzinfo=UTC)


def round_batches(agent: str, rounds: int) -> list[EventBatch]:
    """A calculator round as the agent hands it over: its reply and call, then the result."""
    batches: list[EventBatch] = []
    seq = 0
    for round_ in range(1, rounds + 1):
        call = ToolCall(f"call_{round_}", "calculator", {"expression": "2+3"})
        for bodies in (
            (ModelMessage("script", "", (call,)), ToolCalled(call.id, call.name, call.arguments)),
            (ToolFinished(call.id, call.name, "ok", "5"),),
        ):
            events = []
            for body in bodies:
                seq += 1
                at = START + timedelta(milliseconds=seq)
                events.append(Event(agent, seq, 1, round_, at, body))
            batches.append(EventBatch(tuple(events), "running"))
    return batches


async def timed_writes(
    path: Path, agents: int, rounds: int, url: str = ""
) -> tuple[float, float, int]:
    """Every agent's batches, a step at a time (a step's batches of all agents at once):
    CPU and wall seconds, and the steps timed. The first step is not timed: it opens the
    file (or connects to `url`). Agents are named after the file, so two runs into one
    PostgreSQL projection write agents of their own."""
    projection = Projection(path, url=url)
    each = [round_batches(f"acme.bench-{path.stem}.a{n}", rounds) for n in range(agents)]
    steps = list(zip(*each, strict=True))
    await _write_step(projection, steps[0])
    cpu, wall = time.process_time(), time.perf_counter()
    for batches in steps[1:]:
        await _write_step(projection, batches)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await projection.close()
    return cpu, wall, len(steps) - 1


async def _write_step(projection: Projection, batches: Sequence[EventBatch]) -> None:
    if len(batches) == 1:
        await projection.write(batches[0])  # as one agent's wake does: no task around it
    else:
        await asyncio.gather(*(projection.write(batch) for batch in batches))


async def measure(rounds: int, agents: int, url: str = "") -> list[str]:
    with tempfile.TemporaryDirectory() as home:
        cpu, wall, steps = await timed_writes(Path(home) / "one.db", 1, rounds, url)
        lines = [_line("1 agent, a commit per batch", cpu, wall, steps, steps)]
        cpu, wall, steps = await timed_writes(Path(home) / "many.db", agents, rounds // 10, url)
        lines.append(_line(f"{agents} agents, a batch each", cpu, wall, steps, steps * agents))
    return lines


def _line(what: str, cpu: float, wall: float, groups: int, batches: int) -> str:
    return (
        f"{what:<28} {batches:>7,} batches  {1000 * cpu / groups:6.3f} ms CPU"
        f"  {1000 * wall / groups:6.3f} ms wall per group of writes"
        f"  {1000 * cpu / batches:6.3f} ms CPU per batch"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.commits", description=__doc__)
    parser.add_argument("--rounds", type=int, default=1500, help="rounds of the one agent")
    parser.add_argument("--agents", type=int, default=50, help="agents writing at once")
    parser.add_argument(
        "--url",
        default="",
        help="a PostgreSQL projection to write into (postgresql://...; its acme.bench-* "
        "agents are written again on each run: give an empty database)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 10 or args.agents < 1:
        parser.error("--rounds must be at least 10 and --agents at least 1")
    if args.url and not is_postgres(args.url):
        parser.error("--url must be a PostgreSQL URL (postgresql://...)")
    for line in asyncio.run(measure(args.rounds, args.agents, args.url)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
