"""`python -m bench.wake`: the wake's own CPU per round, without Restate.

teaspill's `Driver` and the plain loop's handler (`bench/plain.py`) run the round
benchmarks' scripted turns (calculator rounds, then the reply) in this process, on the
in-memory context (`services/agent/inline.py`), which runs each step at once and keeps
object state in a dict: no restate-server,
no HTTP/2, no SDK. What is left is what each brings of its own: for teaspill the driver,
the harness, the pipeline, the timeline and the projection (on a file, and once left
out); for both the model worker thread and the tool registry. Each variant runs its turns
several times, on agents of their own each time; it prints the CPU per round of the
whole process and of the event loop's thread, best and median of the repeats. On a
shared machine these move far less than rounds per second through a stack do. No stack.

`--model-on-loop` calls the `script` executor on the event loop's thread instead of its
worker thread, for every variant alike. The hand-over to the worker thread and back (90 µs
a round or more for each variant, and most of what moves between runs) is left out, and
with it the waits around it, which differ a little: teaspill's model step also waits on
its cancellation (about 3 µs a call more, measured alone with 50 calls at once). What is
left is each variant's own Python, measured more steadily.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import restate

from bench.plain import HANDLER, PlainTurn, plain_object
from bench.rounds import bench_spec, reply_text, turn_script
from schemas.model import ModelReply, ModelRequest
from schemas.projection import EventBatch
from schemas.wake import Message
from services.agent.driver import Driver
from services.agent.inline import InlineContext
from services.effects.ledger import MemoryLedger
from services.executor.protocol import ModelExecutor, TextSink, discard
from services.executor.registry import ModelEntry, ModelRegistry, default_models
from services.executor.runner import ModelRunner
from services.executor.scripted import DirectiveExecutor
from services.projection.projector import Projection
from services.settings import Settings
from services.stack import isolated_settings
from services.tools.registry import load_tools

VARIANTS = ("teaspill", "teaspill, no projection", "plain loop")


class OnLoop:
    """A model runner that calls its executor on the event loop's thread (`--model-on-loop`):
    only for an executor that returns at once, such as the `script` model."""

    def __init__(self, executor: ModelExecutor) -> None:
        self._executor = executor
        self._stop = threading.Event()  # never set: the benchmark stops no call

    async def generate(
        self,
        request: ModelRequest,
        cancelled: Callable[[], Awaitable[object]] | None = None,
        on_text: TextSink = discard,
    ) -> ModelReply:
        return self._executor.generate(request, self._stop, on_text)


def on_loop_models() -> ModelRegistry:
    """The `script` model alone, called on the event loop's thread."""
    return ModelRegistry({"script": ModelEntry(lambda: OnLoop(DirectiveExecutor()))})


class _NoProjection:
    def offer(self, batch: EventBatch) -> None:
        pass

    async def write(self, batch: EventBatch) -> None:
        pass


Turn = Callable[[str, int, dict[str, bytes], str], Awaitable[str]]
"""(agent, turn number, its state, invocation id) -> the turn's reply."""


def _variants(
    settings: Settings, models: ModelRegistry, projection: Projection, rounds: int
) -> dict[str, Turn]:
    tools = load_tools(settings.home, settings.tool_modules, MemoryLedger())
    runner = ModelRunner(models)
    plain: Callable[..., Awaitable[Any]] = plain_object(models, tools).handlers[HANDLER].fn

    def wake(live: Projection | _NoProjection) -> Turn:
        async def turn(agent: str, number: int, state: dict[str, bytes], invocation: str) -> str:
            ctx = cast(restate.ObjectContext, InlineContext(agent, state, invocation))
            driver = Driver(ctx, agent, tools, sink=live, model=runner)
            message = Message(turn_script(number, rounds), spec=bench_spec(rounds))
            return (await driver.run(message)).reply

        return turn

    async def plain_turn(agent: str, number: int, state: dict[str, bytes], invocation: str) -> str:
        ctx = InlineContext(agent, state, invocation)
        reply = await plain(ctx, PlainTurn(turn_script(number, rounds), rounds))
        return str(reply.reply)

    return dict(zip(VARIANTS, (wake(projection), wake(_NoProjection()), plain_turn), strict=True))


@dataclass(frozen=True)
class Sample:
    process: float
    loop: float
    """CPU microseconds per round: the whole process's, and the event loop thread's."""


async def _run(turn: Turn, prefix: str, agents: int, turns: int, rounds: int) -> Sample:
    """`agents` agents at once, `turns` turns each, one after another."""
    names = [f"acme.bench.{prefix}-a{n}" for n in range(agents)]
    states: dict[str, dict[str, bytes]] = {name: {} for name in names}
    process, loop = time.process_time(), time.thread_time()
    for number in range(1, turns + 1):
        invocation = f"{prefix}-{number}"
        replies = await asyncio.gather(
            *(turn(name, number, states[name], f"{invocation}-{name}") for name in names)
        )
        wrong = [reply for reply in replies if reply != reply_text(number)]
        if wrong:
            raise RuntimeError(f"a turn replied {wrong[0]!r}, not {reply_text(number)!r}")
    per = 1e6 / (agents * turns * rounds)
    return Sample((time.process_time() - process) * per, (time.thread_time() - loop) * per)


async def measure(
    agents: int, turns: int, rounds: int, repeat: int, *, model_on_loop: bool = False
) -> dict[str, list[Sample]]:
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-wake-") as home_dir:
        settings = isolated_settings(Path(home_dir))
        models = on_loop_models() if model_on_loop else default_models(settings)
        projection = Projection(settings.home / "projection.db")
        variants = _variants(settings, models, projection, rounds)
        samples: dict[str, list[Sample]] = {name: [] for name in variants}
        async with contextlib.AsyncExitStack() as done:
            done.callback(models.close)
            done.push_async_callback(projection.close)
            for index, turn in enumerate(variants.values()):
                await _run(turn, f"w{index}", agents, 1, rounds)  # warm-up: not counted
            for attempt in range(repeat):  # the variants in turn, so drift meets each alike
                for index, (name, turn) in enumerate(variants.items()):
                    prefix = f"r{attempt}v{index}"
                    samples[name].append(await _run(turn, prefix, agents, turns, rounds))
    return samples


def render(
    samples: dict[str, list[Sample]],
    agents: int,
    turns: int,
    rounds: int,
    *,
    model_on_loop: bool = False,
) -> list[str]:
    repeat = len(next(iter(samples.values())))
    model = "the model on the event loop" if model_on_loop else "the model on its thread"
    lines = [
        f"the wake's own CPU per round, without Restate: {agents} agents at once, {turns} "
        f"turns of {rounds} rounds each, {model}; best / median of {repeat}",
        "",
        f"{'variant':<24} {'process us':>15} {'event loop us':>15}",
    ]
    for name, runs in samples.items():
        process = _best_median(run.process for run in runs)
        loop = _best_median(run.loop for run in runs)
        lines.append(f"{name:<24} {process:>15} {loop:>15}")
    return lines


def _best_median(values: Iterable[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[0]:.0f} / {statistics.median(ordered):.0f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wake", description=__doc__)
    parser.add_argument("--agents", type=int, default=50, help="agents at once (50)")
    parser.add_argument("--turns", type=int, default=3, help="turns per agent (3)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per turn (10)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each variant (5)")
    parser.add_argument(
        "--model-on-loop",
        action="store_true",
        help="call the script model on the event loop's thread, not its worker thread",
    )
    args = parser.parse_args(argv)
    if min(args.agents, args.turns, args.repeat) < 1 or args.rounds < 2:
        parser.error("--agents, --turns and --repeat must be at least 1, --rounds at least 2")
    on_loop = args.model_on_loop
    samples = asyncio.run(
        measure(args.agents, args.turns, args.rounds, args.repeat, model_on_loop=on_loop)
    )
    for line in render(samples, args.agents, args.turns, args.rounds, model_on_loop=on_loop):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
