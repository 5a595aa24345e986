"""Whose words a reply is: long messages to the example agent on SmolLM2, and how many
replies only copy a tool's result or a read-back of earlier turns.

    python -m bench.voice --messages 40 --context 1024

One stack of its own (`TEASPILL_MODEL_CONTEXT` set by `--context`, so the chat folds
after a few messages and `recall` becomes useful), one agent on the example spec, and
`--messages` long messages (a few hundred characters each: a story passage and a
question about it). For each turn it reads the timeline: the tool results the turn's
model saw, and its reply. A reply counts as a copy when it carries a read-back's framing
(`returned:`, the JSON of a `recall` answer) or when four fifths of it, and at least
`COPY_RUN` characters, is one run of characters found in a tool result of its turn.
Prints the turns, how many called a tool, how many replies are copies, and the share.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from bench.context import all_events, stack, wake
from schemas.events import Event, ToolFinished, TurnEnded, TurnStarted
from services.cli.talk import EXAMPLE_SPEC
from services.ingress import Ingress
from services.specs import load_spec

COPY_RUN = 24
"""Characters a run shared with a tool result needs at least to count as copied."""
COPIED_SHARE = 0.8
"""Share of the reply that one run shared with a tool result must cover."""
FRAMINGS = ("returned:", '"turns":', '"messages":', '{"index"')
SUBJECTS = (
    ("a lighthouse keeper", "the storm that broke the lamp"),
    ("a baker in a small town", "the bread that would not rise"),
    ("two sisters on a farm", "the goat that learned to open gates"),
    ("a train driver", "the night the signals went dark"),
    ("a girl who collects stones", "the blue stone from the river"),
    ("an old clockmaker", "the clock that ran backwards"),
    ("a fisherman and his dog", "the fish with a ring inside"),
    ("a gardener", "the rose that grew in winter"),
)
ASKS = (
    "What do you think happens next?",
    "Which part of this did you like most, and why?",
    "Can you say what the main person wants?",
    "What was the first story I told you about?",
    "Give the story a short title.",
)


def message(n: int) -> str:
    who, what = SUBJECTS[n % len(SUBJECTS)]
    lines = [
        f"Here is part {n + 1} of a story about {who}, and {what}.",
        f"Every morning {who} walked to the edge of the village before the sun came up.",
        f"People said {what} was only a tale, but nobody could explain the marks it left.",
        "The wind was cold, the road was long, and the lamps along it flickered and hummed.",
        f"On the seventh day {who} found a note that said: meet me where the river bends.",
        "Nobody else had seen the note, and the handwriting looked strangely familiar.",
    ]
    return " ".join(lines) + " " + ASKS[n % len(ASKS)]


def copied(reply: str, results: list[str]) -> bool:
    text = " ".join(reply.split())
    if not text:
        return False
    if any(framing in text for framing in FRAMINGS):
        return True
    for result in results:
        flat = " ".join(result.split())
        match = SequenceMatcher(None, text, flat, autojunk=False).find_longest_match()
        if match.size >= COPY_RUN and match.size >= COPIED_SHARE * len(text):
            return True
    return False


@dataclass(frozen=True)
class Voice:
    turns: int
    succeeded: int
    with_tools: int
    copies: int
    seconds: float

    @property
    def share(self) -> float:
        return self.copies / self.turns if self.turns else 0.0


def per_turn(events: list[Event]) -> list[tuple[list[str], TurnEnded]]:
    turns: list[tuple[list[str], TurnEnded]] = []
    results: list[str] = []
    for event in events:
        if isinstance(event.body, TurnStarted):
            results = []
        elif isinstance(event.body, ToolFinished):
            results.append(event.body.content)
        elif isinstance(event.body, TurnEnded):
            turns.append((results, event.body))
    return turns


def voice(messages: int, context: int, *, show: bool = False) -> Voice:
    spec = load_spec(EXAMPLE_SPEC)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home, stack(Path(home), model_context=context) as s:
        for n in range(messages):
            wake(s, "bench.voice", message(n), spec)
            if (n + 1) % 10 == 0:
                print(f"{n + 1} messages", file=sys.stderr, flush=True)
        seconds = time.perf_counter() - started
        ingress = Ingress(s.ingress_url)
        events = all_events(ingress, "bench.voice")
        ingress.close()
    turns = per_turn(events)
    for n, (results, ended) in enumerate(turns, 1) if show else ():
        mark = "COPY " if copied(ended.reply, results) else ""
        print(f"{n} {ended.outcome} tools={len(results)} {mark}{ended.reply!r}", file=sys.stderr)
    return Voice(
        turns=len(turns),
        succeeded=sum(1 for _, ended in turns if ended.outcome == "succeeded"),
        with_tools=sum(1 for results, _ in turns if results),
        copies=sum(1 for results, ended in turns if copied(ended.reply, results)),
        seconds=seconds,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.voice")
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--show", action="store_true", help="print each turn's reply")
    args = parser.parse_args(argv)
    r = voice(args.messages, args.context, show=args.show)
    print(
        f"n_ctx {args.context}: {r.turns} turns, {r.succeeded} succeeded, "
        f"{r.with_tools} called a tool, {r.copies} replies copied a tool result "
        f"({r.share:.0%}), {r.seconds:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
