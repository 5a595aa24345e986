"""A long-lived agent: what a round costs at turn 10, 100, 1,000, and how long a real
model keeps going.

    python -m bench.context rounds --marks 10,100,1000
    python -m bench.context sustain --context 1024,4096 --turns 150
    python -m bench.context share --turns 6
    python -m bench.context memory --turns 8

`rounds`: one agent on the `script` model writing long replies with a small declared
window (so it folds every few turns); at each mark, the mean over `--sample` turns of
the wake's journal bytes and entries (from `sys_journal`), the state bytes it read, and
its milliseconds end to end. `sustain`: for each window (`TEASPILL_MODEL_CONTEXT`), a
stack of its own and one agent on the example spec chatting with SmolLM2 for `--turns`
turns, or as many as `--minutes` allow (a failed turn is counted and the chat goes on);
prints the turns that succeeded, the first failure, the folds, the model rounds, the
largest prompt, the milliseconds per turn, and the share of prompt tokens served from
the cache in the round right after each fold and in every round from the first fold on.
`share`: one agent on the example spec, short turns one after another on SmolLM2: the
share of each turn's wall time (at the ingress client) spent outside the model's own
measured time (its queue, its first token, its generation), which is the runtime's.
`memory`: two agents on the example spec with `search_memory` granted, taking turns on
SmolLM2 with the same questions; one has memories that match them, so each of its turns
is shown some (the memory layer after the stable prefix), the other has none. Prints each
agent's share of prompt tokens served from its prompt cache from its second turn on, and
how many of its model calls were shown memories.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx
import msgspec

from schemas.events import ContextFolded, Event, ModelMessage, TurnEnded, WakeResult
from schemas.memory import MemoryNote, MemoryScope, MemorySearch
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message, WakeEnvelope
from services.cli.talk import EXAMPLE_SPEC
from services.contracts import AGENT, REMEMBER, WAKE
from services.executor.scripted import script
from services.ingress import Ingress
from services.projection.memories import search_now
from services.settings import Settings
from services.specs import load_spec
from services.stack import Stack, isolated_settings
from services.stack.journal import RestateAdmin
from services.tools.memory import SEARCH_MEMORY

SCRIPT_SPEC = AgentSpec(
    kind="long",
    instructions="Answer at length.",
    model="script",
    limits=Limits(context_window=1500, max_tokens=64),
)
QUESTIONS = (
    "Tell me something about the sea.",
    "What did you just say, in one sentence?",
    "Name a colour and a fruit.",
    "What was the first thing I asked you today?",
    "Why is the sky blue?",
    "Give me a short tip for cooking rice.",
)


@contextmanager
def stack(home: Path, **overrides: object) -> Iterator[Settings]:
    settings = isolated_settings(home, **overrides)
    with Stack(settings, gateway=False):
        yield settings


def wake(settings: Settings, address: str, text: str, spec: AgentSpec) -> tuple[WakeResult, str]:
    answer = httpx.post(
        f"{settings.ingress_url}{WAKE.path(address)}",
        content=msgspec.json.encode(WakeEnvelope(Message(text, spec=spec))),
        headers={"content-type": "application/json"},
        # A turn with a fold on a loaded machine can take many minutes; the wake is
        # durable and goes on whatever the client does, so wait for it.
        timeout=3600.0,
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
    succeeded: int
    first_failure: int | None
    folds: int
    rounds: int
    ms_per_turn: float
    max_prompt: int
    cached_after_fold: float
    """Cached share of the prompt in the round right after each fold."""
    cached_overall: float
    """Cached share of the prompt in every round from the first fold on."""


def sustain(context: int, turns: int, minutes: float = 0) -> Sustained:
    """One agent chatting with SmolLM2 at `context` tokens for `turns` turns (or fewer, if
    `minutes` above 0 pass first); every turn is run, a failure is counted and the chat
    goes on."""
    spec = load_spec(EXAMPLE_SPEC)
    outcomes: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home, stack(Path(home), model_context=context) as s:
        for turn in range(1, turns + 1):
            if minutes and time.perf_counter() - started > minutes * 60:
                break
            result, _ = wake(s, "bench.chat", QUESTIONS[turn % len(QUESTIONS)], spec)
            outcomes.append(result.status.last_outcome or "")
            if turn % 10 == 0:
                failed = sum(1 for outcome in outcomes if outcome != "succeeded")
                print(f"n_ctx {context}: {turn} turns, {failed} failed", file=sys.stderr)
        elapsed = time.perf_counter() - started
        ingress = Ingress(s.ingress_url)
        events = all_events(ingress, "bench.chat")
        ingress.close()
    return summarize(context, outcomes, events, elapsed)


def summarize(context: int, outcomes: list[str], events: list[Event], seconds: float) -> Sustained:
    ended = [e.body.outcome for e in events if isinstance(e.body, TurnEnded)]
    if ended != outcomes:
        raise SystemExit("The timeline's turn endings differ from the answers the wakes gave.")
    failed = [n for n, outcome in enumerate(outcomes, 1) if outcome != "succeeded"]
    calls = [e.body for e in events if isinstance(e.body, ModelMessage)]
    right_after, from_first = after_folds(events)
    return Sustained(
        context=context,
        turns=len(outcomes),
        succeeded=len(outcomes) - len(failed),
        first_failure=failed[0] if failed else None,
        folds=sum(1 for e in events if isinstance(e.body, ContextFolded)),
        rounds=len(calls),
        ms_per_turn=seconds * 1000 / max(len(outcomes), 1),
        max_prompt=max((c.usage.prompt_tokens for c in calls), default=0),
        cached_after_fold=cached_share(right_after),
        cached_overall=cached_share(from_first),
    )


def share(turns: int) -> tuple[list[float], list[float]]:
    """Each turn's wall seconds at the client, and the model's own seconds in it: one agent
    on the example spec, after one warm-up turn of another agent (the model's load)."""
    spec = load_spec(EXAMPLE_SPEC)
    walls: list[float] = []
    with tempfile.TemporaryDirectory() as home, stack(Path(home)) as s:
        wake(s, "bench.warm-up", QUESTIONS[0], spec)
        for turn in range(turns):
            started = time.perf_counter()
            wake(s, "bench.share", QUESTIONS[turn % len(QUESTIONS)], spec)
            walls.append(time.perf_counter() - started)
        with closing(Ingress(s.ingress_url)) as ingress:
            events = all_events(ingress, "bench.share")
    model = [0.0] * turns
    for event in events:
        if isinstance(event.body, ModelMessage) and 0 < event.turn <= turns:
            model[event.turn - 1] += model_seconds(event.body)
    return walls, model


MEMORIES = (
    "The person sails a small boat on the sea every summer.",
    "The person's favourite colour is green and their favourite fruit is mango.",
    "The person cooks rice in a pot with a lid.",
    "The person asked why the sky is blue last week.",
    "The person likes short answers in one sentence.",
)


def memory_share(turns: int) -> dict[str, tuple[float, float, int, int]]:
    """Per agent: the cached share of its prompts from its second turn on, that of its
    model calls shown memories, how many those were, and all its model calls."""
    spec = msgspec.structs.replace(load_spec(EXAMPLE_SPEC), tools=(SEARCH_MEMORY,))
    agents = ("bench.remembers", "bench.forgets")
    with (
        tempfile.TemporaryDirectory() as home,
        stack(Path(home)) as s,
        closing(Ingress(s.ingress_url)) as ingress,
    ):
        scope = MemoryScope("bench", "agent", agents[0])
        for text in MEMORIES:
            ingress.call(REMEMBER, MemoryNote(scope, "episodic", text), scope.key)
        probe = MemorySearch("sea", (scope,))
        deadline = time.monotonic() + 60
        while not search_now(s.home / "projection.db", probe):
            if time.monotonic() > deadline:
                raise SystemExit("the memories did not reach the projection in 60 s")
            time.sleep(0.2)
        wake(s, "bench.warm-up", QUESTIONS[0], spec)
        for turn in range(turns):
            for address in agents:
                wake(s, address, QUESTIONS[turn % len(QUESTIONS)], spec)
        found: dict[str, tuple[float, float, int, int]] = {}
        for address in agents:
            messages = [
                e.body
                for e in all_events(ingress, address)
                if isinstance(e.body, ModelMessage) and e.turn >= 2
            ]
            shown = [m for m in messages if m.memories]
            found[address] = (
                cached_share(messages),
                cached_share(shown),
                len(shown),
                len(messages),
            )
    return found


def print_memory_share(turns: int) -> None:
    print("agent              cached from turn 2   calls shown memories   their cached share")
    for address, (cached, of_shown, shown, calls) in memory_share(turns).items():
        print(f"{address:<18} {cached:>18.1%}   {shown:>9} of {calls:<8}   {of_shown:>18.1%}")


def model_seconds(message: ModelMessage) -> float:
    """The call's queue, its first token, then its other tokens at the measured rate."""
    timing, tokens = message.timing, message.usage.completion_tokens
    generating = (tokens - 1) / timing.tokens_per_second if timing.tokens_per_second else 0.0
    return timing.queue_seconds + timing.first_token_seconds + max(generating, 0.0)


def print_share(turns: int) -> None:
    walls, model = share(turns)
    print("turn  wall ms  model ms  outside the model")
    for n, (wall, own) in enumerate(zip(walls, model, strict=True), 1):
        print(f"{n:>4}  {wall * 1000:>7.0f}  {own * 1000:>8.0f}  {1 - own / wall:>16.1%}")
    outside = sum(walls) - sum(model)
    print(
        f"all   {sum(walls) * 1000:>7.0f}  {sum(model) * 1000:>8.0f}  {outside / sum(walls):>16.1%}"
        f"   ({outside * 1000 / turns:.0f} ms a turn outside the model)"
    )


def all_events(ingress: Ingress, address: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = ingress.timeline(address, after_seq=len(events), limit=500)
        events.extend(page.events)
        if not page.events or len(events) >= page.last_seq:
            return events


def after_folds(events: list[Event]) -> tuple[list[ModelMessage], list[ModelMessage]]:
    """The model messages right after each fold, and every one from the first fold on."""
    right_after: list[ModelMessage] = []
    from_first: list[ModelMessage] = []
    folded = seen_fold = False
    for event in events:
        if isinstance(event.body, ContextFolded):
            folded = seen_fold = True
        elif isinstance(event.body, ModelMessage) and seen_fold:
            from_first.append(event.body)
            if folded:
                right_after.append(event.body)
            folded = False
    return right_after, from_first


def cached_share(messages: list[ModelMessage]) -> float:
    prompt = sum(m.usage.prompt_tokens for m in messages)
    return sum(m.usage.cached_tokens for m in messages) / prompt if prompt else 0.0


def sustained_line(r: Sustained) -> str:
    failures = r.turns - r.succeeded
    first = f" (first at turn {r.first_failure})" if r.first_failure else ""
    return (
        f"| {r.context} | {r.succeeded} of {r.turns} | {failures}{first} | {r.folds} "
        f"| {r.rounds} | {r.max_prompt} | {r.ms_per_turn:,.0f} | {r.cached_after_fold:.0%} "
        f"| {r.cached_overall:.0%} |"
    )


def print_rounds(marks: list[int], sample: int) -> None:
    print("| turn | journal bytes | entries | state bytes read | ms per round |")
    print("|---:|---:|---:|---:|---:|")
    for m in rounds(marks, sample):
        print(
            f"| {m.turn} | {m.journal_bytes:.0f} | {m.entries:.1f} | {m.state_read:.0f} "
            f"| {m.ms:.0f} |"
        )


def print_sustained(contexts: list[int], turns: int, minutes: float) -> None:
    print(
        "| n_ctx | turns succeeded | failures | folds | rounds | largest prompt "
        "| ms per turn | cached, round after a fold | cached, every round after |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for context in contexts:
        print(sustained_line(sustain(context, turns, minutes)), flush=True)


def numbers(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers"
        ) from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"{text!r} has a number below 1")
    return values


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # SIGTERM stops the run as Ctrl-C does, so each stack is taken down on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(prog="python -m bench.context")
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("rounds")
    r.add_argument("--marks", type=numbers, default="10,100,1000")
    r.add_argument("--sample", type=int, default=5)
    s = sub.add_parser("sustain")
    s.add_argument(
        "--context", type=numbers, default="1024,4096", help="windows to run, comma-separated"
    )
    s.add_argument("--turns", type=int, default=150)
    s.add_argument(
        "--minutes", type=float, default=0, help="per window: start no turn after this (0: none)"
    )
    h = sub.add_parser("share")
    h.add_argument("--turns", type=int, default=6)
    m = sub.add_parser("memory")
    m.add_argument("--turns", type=int, default=8)
    args = parser.parse_args(argv)
    try:
        if args.what == "rounds":
            print_rounds(sorted(args.marks), args.sample)
        elif args.what == "share":
            print_share(args.turns)
        elif args.what == "memory":
            print_memory_share(args.turns)
        else:
            print_sustained(args.context, args.turns, args.minutes)
    except KeyboardInterrupt:
        print("Interrupted: the stack was stopped; no figures.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
