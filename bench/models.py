"""`python -m bench.models`: the model plane on the bundled SmolLM2 (2 threads).

1. **Agents taking turns on one model.** 8 agents, 6 turns each, interleaved round-robin
   (a1 t1, a2 t1, ... a8 t1, a1 t2, ...) on one in-process llama.cpp model with the
   per-agent prompt cache (`on`), the same on a second model without it (`off`: only the
   prefix llama.cpp holds), and, as the reference, the same conversations one agent
   after another on a third model (`alone`: each agent's turns back to back, as if it had
   the model to itself). The three are called in turn, one call each, so that a change
   in the machine's load falls on all alike. Each turn's prompt is the agent's
   conversation so far plus a new question, as the harness builds it. Reported: prompt
   tokens reused on turns after the first, prompt tokens evaluated, seconds spent in each
   setting's calls, the save-and-restore cost per agent switch, the bytes the cache holds.
2. **OpenAI-compatible path against in-process.** One agent's 6 turns through
   `llama_cpp.server` (the same GGUF, the same threads) and through the in-process
   executor: time to first token and generation tokens/s.

A run checks that `on` wrote the very same replies as `alone` (a restored prefix must leave
the model exactly where the agent left it) before it prints figures. `off` may differ:
llama.cpp evaluates a reply's tokens one at a time when it writes them and in a batch
when they come back in the next prompt, and the two give slightly different logits, so
greedy decoding can part at a near tie. How many of its replies differ is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from schemas.chat import ChatMessage
from schemas.model import ModelReply, ModelRequest
from services.executor.config import RemoteModel
from services.executor.llama import LlamaExecutor, bundled_model_path
from services.executor.remote import RemoteExecutor
from services.executor.worker import ModelWorker

THREADS = 2
CONTEXT = 4096
MAX_TOKENS = 24
CACHE_BYTES = 256 * 1024 * 1024
INSTRUCTIONS = (
    "You are the support assistant of a small bakery that sells bread, cakes and pastries. "
    "Answer customers politely and briefly, in one or two sentences. The shop opens at "
    "seven in the morning and closes at six in the evening, every day but Monday. Orders "
    "for cakes need two days' notice. Deliveries are made within five kilometres of the "
    "shop, for a fee of three euros, free above thirty euros. Gluten-free bread is baked "
    "on Thursdays only. Payment by card or cash. Do not promise anything not written here. "
    "If you do not know, say that a person from the shop will answer soon. "
) * 3
QUESTIONS = (
    "When do you open?",
    "Can I order a birthday cake for Saturday?",
    "Do you deliver to the station?",
    "Is there gluten-free bread today?",
    "Can I pay by card?",
    "Thank you, goodbye.",
)


@dataclass(frozen=True)
class CacheRun:
    setting: str
    """`on`, `off` or `alone`."""
    wall_seconds: float
    """Seconds spent in this setting's calls."""
    reused_after_first: float
    """Cached / prompt tokens over every turn after each agent's first."""
    evaluated_tokens: int
    """Prompt tokens llama.cpp evaluated (not served from a cache), over every turn."""
    switches: int
    switch_ms: float
    """Mean time to save the leaving agent's state and restore the coming one's."""
    cache_bytes: int
    replies: tuple[str, ...]


def conversation(agent: int, history: Sequence[ChatMessage], turn: int) -> ModelRequest:
    system = ChatMessage(
        role="system", content=f"You serve customer number {agent}. {INSTRUCTIONS}"
    )
    question = ChatMessage(role="user", content=QUESTIONS[turn])
    return ModelRequest(
        "smollm2", (system, *history, question), max_tokens=MAX_TOKENS, agent=f"bench.a{agent}"
    )


class Conversations:
    """Every agent's conversation on one model: its (request, reply) pairs, and the seconds
    its calls took."""

    def __init__(self, generate: Callable[[ModelRequest], ModelReply], agents: int) -> None:
        self._generate = generate
        self._histories: list[list[ChatMessage]] = [[] for _ in range(agents)]
        self.calls: list[list[tuple[ModelRequest, ModelReply]]] = [[] for _ in range(agents)]
        self.seconds = 0.0

    def turn(self, agent: int, turn: int) -> None:
        request = conversation(agent, self._histories[agent], turn)
        started = time.perf_counter()
        reply = self._generate(request)
        self.seconds += time.perf_counter() - started
        self._histories[agent] += [request.messages[-1], reply.message]
        self.calls[agent].append((request, reply))


def round_robin(agents: int, turns: int) -> list[tuple[int, int]]:
    return [(agent, turn) for turn in range(turns) for agent in range(agents)]


def one_after_another(agents: int, turns: int) -> list[tuple[int, int]]:
    return [(agent, turn) for agent in range(agents) for turn in range(turns)]


def cache_runs(agents: int, turns: int) -> list[CacheRun]:
    """`on`, `off` and `alone`, each on its own model, called in turn."""
    settings = {"on": CACHE_BYTES, "off": 0, "alone": 0}
    executors = {
        name: LlamaExecutor(
            bundled_model_path(), n_ctx=CONTEXT, n_threads=THREADS, cache_bytes=cache_bytes
        )
        for name, cache_bytes in settings.items()
    }
    runs = {name: Conversations(_blocking(e), agents) for name, e in executors.items()}
    orders = [round_robin(agents, turns), round_robin(agents, turns)]
    orders.append(one_after_another(agents, turns))
    for steps in zip(*orders, strict=True):
        for run, (agent, turn) in zip(runs.values(), steps, strict=True):
            run.turn(agent, turn)
    return [_cache_run(name, executors[name], runs[name]) for name in settings]


def _blocking(executor: LlamaExecutor) -> Callable[[ModelRequest], ModelReply]:
    return lambda request: executor.generate(request, threading.Event())


def _cache_run(name: str, executor: LlamaExecutor, run: Conversations) -> CacheRun:
    replies = [reply for agent in run.calls for _, reply in agent]
    later = [reply for agent in run.calls for _, reply in agent[1:]]
    prompt = sum(r.usage.prompt_tokens for r in later)
    cached = sum(r.usage.cached_tokens for r in later)
    cache = executor.cache
    switches = cache.stats.switches if cache is not None else 0
    return CacheRun(
        setting=name,
        wall_seconds=run.seconds,
        reused_after_first=cached / prompt if prompt else 0.0,
        evaluated_tokens=sum(r.usage.prompt_tokens - r.usage.cached_tokens for r in replies),
        switches=switches,
        switch_ms=1000 * cache.stats.switch_seconds / switches if cache and switches else 0.0,
        cache_bytes=cache.store.bytes if cache is not None else 0,
        replies=tuple(reply.message.content for reply in replies),
    )


@dataclass(frozen=True)
class PathRun:
    path: str
    first_token_ms: float
    """Median over the turns."""
    tokens_per_second: float
    """Median over the turns."""


def path_figures(name: str, replies: Sequence[ModelReply]) -> PathRun:
    return PathRun(
        name,
        1000 * statistics.median(r.timing.first_token_seconds for r in replies),
        statistics.median(r.timing.tokens_per_second for r in replies),
    )


def one_agent(generate: Callable[[ModelRequest], ModelReply], turns: int) -> list[ModelReply]:
    run = Conversations(generate, 1)
    for _, turn in one_after_another(1, turns):
        run.turn(0, turn)
    return [reply for _, reply in run.calls[0]]


def in_process(turns: int) -> PathRun:
    worker = ModelWorker(LlamaExecutor(bundled_model_path(), n_ctx=CONTEXT, n_threads=THREADS))
    try:
        replies = one_agent(lambda r: asyncio.run(worker.generate(r)), turns)
    finally:
        worker.close()
    return path_figures("in-process", replies)


def served(turns: int, log_dir: Path) -> PathRun:
    from tests.durable.model_server import MODEL_ID, LlamaServer  # noqa: PLC0415

    server = LlamaServer(log_dir, "bench-key", threads=THREADS, context=CONTEXT)
    server.start()
    try:
        config = RemoteModel(server.base_url, MODEL_ID, api_key_env="", timeout=120)

        async def call(request: ModelRequest) -> ModelReply:
            async with httpx.AsyncClient(headers={"authorization": "Bearer bench-key"}) as c:
                return await RemoteExecutor("served", config, c).generate(request)

        replies = one_agent(lambda r: asyncio.run(call(r)), turns)
    finally:
        server.process.stop()
    return path_figures("openai-compatible", replies)


def render(runs: Sequence[CacheRun], paths: Sequence[PathRun], agents: int, turns: int) -> str:
    lines = [
        f"{agents} agents x {turns} turns, SmolLM2-135M, {THREADS} threads, max_tokens "
        f"{MAX_TOKENS}; on and off round-robin, alone one agent after another; called in turn",
        "",
        "setting  reused (turns 2+)  evaluated  seconds  switches  ms/switch  cache MiB",
        "-------  -----------------  ---------  -------  --------  ---------  ---------",
    ]
    for run in runs:
        lines.append(
            f"{run.setting:<7}  {run.reused_after_first:>17.1%}  {run.evaluated_tokens:>9}  "
            f"{run.wall_seconds:>7.1f}  {run.switches:>8}  {run.switch_ms:>9.1f}  "
            f"{run.cache_bytes / 2**20:>9.1f}"
        )
    on, off = runs[0], runs[1]
    parted = sum(a != b for a, b in zip(on.replies, off.replies, strict=True))
    lines += [
        "",
        f"on wrote the same {len(on.replies)} replies as alone; off parted from them in "
        f"{parted} (near ties, see the module's docstring)",
        "",
        render_paths(paths),
    ]
    return "\n".join(lines)


def _paths(turns: int) -> list[PathRun]:
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-models-") as logs:
        paths = [in_process(turns), served(turns, Path(logs))]
    print(f"bench: {[asdict(p) for p in paths]}", file=sys.stderr, flush=True)
    return paths


def render_paths(paths: Sequence[PathRun]) -> str:
    lines = ["path               first token ms  tokens/s", "-" * 43]
    for path in paths:
        lines.append(
            f"{path.path:<17}  {path.first_token_ms:>14.0f}  {path.tokens_per_second:>8.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.models", description=__doc__)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--turns", type=int, default=len(QUESTIONS), choices=range(1, 7))
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results here")
    parser.add_argument(
        "--paths-only",
        action="store_true",
        help="only the in-process and OpenAI-compatible paths (first token, tokens/s)",
    )
    args = parser.parse_args(argv)
    if args.paths_only:
        paths = _paths(args.turns)
        print(render_paths(paths))
        return 0
    runs = cache_runs(args.agents, args.turns)
    for run in runs:
        print(f"bench: {asdict(run) | {'replies': None}}", file=sys.stderr, flush=True)
    if runs[0].replies != runs[2].replies:
        print(
            "bench: with the per-agent cache the agents wrote other replies than alone; "
            "no figures.",
            file=sys.stderr,
        )
        return 1
    paths = _paths(args.turns)
    print(render(runs, paths, args.agents, args.turns))
    if args.json is not None:
        result = {
            "cache": [asdict(r) | {"replies": None} for r in runs],
            "paths": [asdict(p) for p in paths],
        }
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
