"""A long-lived agent: what a round costs at turn 10, 100, 1,000, and how long a real
model keeps going.

    python -m bench.context rounds --marks 10,100,1000
    python -m bench.context sustain --context 1024 --turns 60

`rounds`: one agent on the `script` model writing long replies with a small declared
window (so it folds every few turns); at each mark, the mean over `--sample` turns of
the wake's journal bytes and entries (from `sys_journal`), the state bytes it read, and
its milliseconds end to end. `sustain`: one agent chatting with SmolLM2 at the given
`TEASPILL_MODEL_CONTEXT` until a turn fails or `--turns` is reached; prints the turns
that succeeded, the folds, and the share of prompt tokens served from the cache in the
rounds right after a fold.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from schemas.events import ContextFolded, Event, ModelMessage, TurnEnded, WakeResult
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message, WakeEnvelope
from services.contracts import AGENT, WAKE
from services.executor.scripted import script
from services.ingress import Ingress
from services.settings import Settings
from services.stack import Endpoint, RestateServer, isolated_settings, register
from services.stack.journal import RestateAdmin

SCRIPT_SPEC = AgentSpec(
    kind="long",
    instructions="Answer at length.",
    model="script",
    limits=Limits(context_window=1500, max_tokens=64),
)
CHAT_SPEC = AgentSpec(kind="chat", instructions="You are a friendly assistant.", model="smollm2")
QUESTIONS = (
    "Tell me something about the sea.",
    "What did you just say, in one sentence?",
    "Name a colour and a fruit.",
    "Why is the sky blue?",
    "Give me a short tip for cooking rice.",
)


@contextmanager
def stack(home: Path, **overrides: object) -> Iterator[Settings]:
    settings = isolated_settings(home, **overrides)
    restate, endpoint = RestateServer(settings), Endpoint(settings)
    restate.start()
    try:
        endpoint.start()
        register(settings)
        yield settings
    finally:
        restate.stop()
        endpoint.stop()


def wake(settings: Settings, address: str, text: str, spec: AgentSpec) -> tuple[WakeResult, str]:
    answer = httpx.post(
        f"{settings.ingress_url}{WAKE.path(address)}",
        content=msgspec.json.encode(WakeEnvelope(Message(text, spec=spec))),
        headers={"content-type": "application/json"},
        timeout=600.0,
    )
    answer.raise_for_status()
    result = msgspec.json.decode(answer.content, type=WakeResult)
    return result, answer.headers["x-restate-id"]


@dataclass(frozen=True)
class Mark:
    turn: int
    journal_bytes: float
    entries: float
    state_read: float
    ms: float


def rounds(marks: list[int], sample: int) -> list[Mark]:
    measured: dict[int, list[tuple[int, int, int, float]]] = {m: [] for m in marks}
    with tempfile.TemporaryDirectory() as home, stack(Path(home)) as settings:
        admin = RestateAdmin(settings.admin_url)
        admin.retain_journals([AGENT])
        for turn in range(1, max(marks) + 1):
            words = " ".join(f"w{turn}x{i}" for i in range(80))
            started = time.perf_counter()
            result, invocation = wake(
                settings, "bench.long", script({"reply": f"Reply {turn}: {words}"}), SCRIPT_SPEC
            )
            elapsed = (time.perf_counter() - started) * 1000
            if result.status.last_outcome != "succeeded":
                raise SystemExit(f"turn {turn} did not succeed: {result}")
            for mark in marks:
                if mark - sample < turn <= mark:
                    journal = admin.journal(invocation)
                    reads = [
                        e for e in journal.entries if e.entry_type == "Notification: GetLazyState"
                    ]
                    read = sum(e.raw_length for e in reads)
                    size = journal.size
                    measured[mark].append((size.bytes, size.entries, read, elapsed))
        admin.close()
    return [
        Mark(
            mark,
            statistics.mean(v[0] for v in values),
            statistics.mean(v[1] for v in values),
            statistics.mean(v[2] for v in values),
            statistics.mean(v[3] for v in values),
        )
        for mark, values in measured.items()
    ]


@dataclass(frozen=True)
class Sustained:
    context: int
    turns: int
    failed_at: int | None
    folds: int
    cached_after_fold: float


def sustain(context: int, turns: int) -> Sustained:
    with tempfile.TemporaryDirectory() as home, stack(Path(home), model_context=context) as s:
        failed_at = None
        for turn in range(1, turns + 1):
            result, _ = wake(s, "bench.chat", QUESTIONS[turn % len(QUESTIONS)], CHAT_SPEC)
            if result.status.last_outcome != "succeeded":
                failed_at = turn
                break
        ingress = Ingress(s.ingress_url)
        events = all_events(ingress, "bench.chat")
        ingress.close()
    done = sum(1 for e in events if isinstance(e.body, TurnEnded) and e.body.outcome == "succeeded")
    return Sustained(context, done, failed_at, folds(events), cached_after_fold(events))


def all_events(ingress: Ingress, address: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = ingress.timeline(address, after_seq=len(events), limit=500)
        events.extend(page.events)
        if not page.events or len(events) >= page.last_seq:
            return events


def folds(events: list[Event]) -> int:
    return sum(1 for e in events if isinstance(e.body, ContextFolded))


def cached_after_fold(events: list[Event]) -> float:
    """Cached share of prompt tokens of the model calls that follow a fold, after the
    first one (which runs on the new prefix)."""
    prompt = cached = 0
    since_fold = -1
    for event in events:
        if isinstance(event.body, ContextFolded):
            since_fold = 0
        elif isinstance(event.body, ModelMessage) and since_fold >= 0:
            since_fold += 1
            if since_fold > 1:
                prompt += event.body.usage.prompt_tokens
                cached += event.body.usage.cached_tokens
    return cached / prompt if prompt else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.context")
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("rounds")
    r.add_argument("--marks", default="10,100,1000")
    r.add_argument("--sample", type=int, default=5)
    s = sub.add_parser("sustain")
    s.add_argument("--context", type=int, default=1024)
    s.add_argument("--turns", type=int, default=60)
    args = parser.parse_args(argv)
    if args.what == "rounds":
        marks = sorted(int(m) for m in args.marks.split(","))
        print("| turn | journal bytes | entries | state bytes read | ms per round |")
        print("|---:|---:|---:|---:|---:|")
        for m in rounds(marks, args.sample):
            print(
                f"| {m.turn} | {m.journal_bytes:.0f} | {m.entries:.1f} | {m.state_read:.0f} "
                f"| {m.ms:.0f} |"
            )
    else:
        result = sustain(args.context, args.turns)
        print(
            f"n_ctx {result.context}: {result.turns} turns succeeded "
            f"(first failure: {result.failed_at}), {result.folds} folds, "
            f"{result.cached_after_fold:.0%} of prompt tokens cached in rounds after a fold"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
