"""`python -m bench.models`: the model plane on the bundled SmolLM2 (2 threads).

1. **Agents taking turns on one model.** 8 agents, 6 turns each, interleaved round-robin
   (a1 t1, a2 t1, ... a8 t1, a1 t2, ...) on one in-process llama.cpp model, once with the
   per-agent prompt cache and once without (only the prefix llama.cpp holds). Each turn's
   prompt is the agent's conversation so far plus a new question, as the harness builds
   it. Reported: prompt tokens reused on turns after the first, wall time of each run,
   the save-and-restore cost per agent switch, the bytes the cache holds.
2. **OpenAI-compatible path against in-process.** One agent's 6 turns through
   `llama_cpp.server` (the same GGUF, the same threads) and through the in-process
   executor: time to first token and generation tokens/s.

A run checks that both cache settings wrote the very same replies (a restored prefix
must not change what the model writes) before it prints figures.
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
    cache: bool
    wall_seconds: float
    reused_after_first: float
    """Cached / prompt tokens over every turn after each agent's first."""
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


def interleaved(
    generate: Callable[[ModelRequest], ModelReply], agents: int, turns: int
) -> list[list[tuple[ModelRequest, ModelReply]]]:
    """Every agent's turns, run round-robin; per agent, its (request, reply) pairs."""
    histories: list[list[ChatMessage]] = [[] for _ in range(agents)]
    calls: list[list[tuple[ModelRequest, ModelReply]]] = [[] for _ in range(agents)]
    for turn in range(turns):
        for agent in range(agents):
            request = conversation(agent, histories[agent], turn)
            reply = generate(request)
            histories[agent] += [request.messages[-1], reply.message]
            calls[agent].append((request, reply))
    return calls


def cache_run(agents: int, turns: int, *, cache: bool) -> CacheRun:
    executor = LlamaExecutor(
        bundled_model_path(),
        n_ctx=CONTEXT,
        n_threads=THREADS,
        cache_bytes=CACHE_BYTES if cache else 0,
    )
    started = time.perf_counter()
    calls = interleaved(lambda r: executor.generate(r, threading.Event()), agents, turns)
    wall = time.perf_counter() - started
    later = [reply for agent in calls for _, reply in agent[1:]]
    prompt = sum(r.usage.prompt_tokens for r in later)
    cached = sum(r.usage.cached_tokens for r in later)
    stats = executor.cache.stats if executor.cache is not None else None
    switches = stats.switches if stats is not None else 0
    return CacheRun(
        cache=cache,
        wall_seconds=wall,
        reused_after_first=cached / prompt if prompt else 0.0,
        switches=switches,
        switch_ms=1000 * stats.switch_seconds / switches if stats and switches else 0.0,
        cache_bytes=executor.cache.store.bytes if executor.cache is not None else 0,
        replies=tuple(reply.message.content for agent in calls for _, reply in agent),
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
    return [reply for _, reply in interleaved(generate, 1, turns)[0]]


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
        f"{agents} agents x {turns} turns, interleaved round-robin, SmolLM2-135M, "
        f"{THREADS} threads, max_tokens {MAX_TOKENS}",
        "",
        "per-agent cache  reused (turns 2+)  wall s  switches  ms/switch  cache MiB",
        "----------------  -----------------  ------  --------  ---------  ---------",
    ]
    for run in runs:
        lines.append(
            f"{'on' if run.cache else 'off':<16}  {run.reused_after_first:>17.1%}  "
            f"{run.wall_seconds:>6.1f}  {run.switches:>8}  {run.switch_ms:>9.1f}  "
            f"{run.cache_bytes / 2**20:>9.1f}"
        )
    lines += ["", "path               first token ms  tokens/s", "-" * 43]
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
    args = parser.parse_args(argv)
    runs = []
    for on in (True, False):
        runs.append(cache_run(args.agents, args.turns, cache=on))
        print(f"bench: {asdict(runs[-1]) | {'replies': None}}", file=sys.stderr, flush=True)
    if runs[0].replies != runs[1].replies:
        print("bench: the replies differ with and without the cache; no figures.", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-models-") as logs:
        paths = [in_process(args.turns), served(args.turns, Path(logs))]
    print(f"bench: {[asdict(p) for p in paths]}", file=sys.stderr, flush=True)
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
