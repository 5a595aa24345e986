"""Graders: pure checks of one case's recorded timeline.

Each grader reads a `Transcript` (the events of the case's turns, as the gateway recorded
them) and answers a `GradeResult`: passed or not, and a sentence saying what it saw. No
grader does I/O; the model-graded `judge` is asked by the runner, which hands its verdict
to `verdict_of`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from schemas.chat import ToolCall
from schemas.events import Event, ModelMessage, TurnEnded

OUTCOMES = (
    "succeeded",
    "failed",
    "stopped",
    "superseded",
    "awaiting_approval",
    "rejected",
    "refused",
    "timed_out",
)
"""What a case's last turn came to: a turn's ending, or where the case stopped short of
one (a person's approval asked, the message rejected while busy, the gateway refused it,
the case's time up)."""

SHOWN = 120
"""Characters of a reply quoted in a sentence."""


class GradeResult(msgspec.Struct, frozen=True):
    grader: str
    """The grader as the file wrote it, e.g. `reply_contains "4"`."""
    passed: bool
    detail: str
    """One sentence: what the grader saw."""


@dataclass(frozen=True)
class Transcript:
    """What one case did: its messages, and the events of the turns they started."""

    messages: tuple[str, ...]
    events: tuple[Event, ...]
    outcome: str
    replies: tuple[str, ...] = ()
    """Each turn's reply, in order."""
    problem: str = ""
    """Why the case stopped short (a refusal, its time up); empty when it ran through."""

    @property
    def reply(self) -> str:
        return self.replies[-1] if self.replies else ""

    @property
    def rounds(self) -> int:
        return sum(1 for e in self.events if isinstance(e.body, ModelMessage))

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens of every turn of the case."""
        ended = (e.body for e in self.events if isinstance(e.body, TurnEnded))
        return sum(b.usage.prompt_tokens + b.usage.completion_tokens for b in ended)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every call the model asked for, whether it then ran, waited for a person's
        approval or was refused (`tool_finished` says which)."""
        asked = (e.body for e in self.events if isinstance(e.body, ModelMessage))
        return tuple(call for body in asked for call in body.tool_calls)


def _quoted(text: str) -> str:
    cut = text if len(text) <= SHOWN else text[:SHOWN] + "..."
    return repr(cut)


@dataclass(frozen=True)
class ReplyContains:
    text: str

    @property
    def label(self) -> str:
        return f"reply_contains {self.text!r}"

    def grade(self, seen: Transcript) -> GradeResult:
        found = self.text in seen.reply
        said = "contains it" if found else f"does not contain it: {_quoted(seen.reply)}"
        return GradeResult(self.label, found, f"The reply {said}.")


@dataclass(frozen=True)
class ReplyLacks:
    text: str

    @property
    def label(self) -> str:
        return f"reply_lacks {self.text!r}"

    def grade(self, seen: Transcript) -> GradeResult:
        found = self.text in seen.reply
        said = f"contains it: {_quoted(seen.reply)}" if found else "does not contain it"
        return GradeResult(self.label, not found, f"The reply {said}.")


@dataclass(frozen=True)
class ReplyMatches:
    pattern: re.Pattern[str]

    @property
    def label(self) -> str:
        return f"reply_matches {self.pattern.pattern!r}"

    def grade(self, seen: Transcript) -> GradeResult:
        found = self.pattern.search(seen.reply) is not None
        said = "matches" if found else f"does not match: {_quoted(seen.reply)}"
        return GradeResult(self.label, found, f"The reply {said}.")


def _fits(wanted: dict[str, Any], given: dict[str, Any]) -> bool:
    """Every wanted argument is given with that value (others may be given too)."""
    return all(name in given and given[name] == value for name, value in wanted.items())


def _with(arguments: dict[str, Any]) -> str:
    return f" with {msgspec.json.encode(arguments).decode()}" if arguments else ""


@dataclass(frozen=True)
class ToolUse:
    """`tool_called` (`called`) or `tool_not_called`: a call of `name` whose arguments
    include every one of `arguments`."""

    name: str
    called: bool
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        verb = "tool_called" if self.called else "tool_not_called"
        return f"{verb} {self.name!r}{_with(self.arguments)}"

    def grade(self, seen: Transcript) -> GradeResult:
        calls = [c for c in seen.tool_calls if c.name == self.name]
        hits = [c for c in calls if _fits(self.arguments, c.arguments)]
        if hits:
            said = f"{self.name} was called{_with(hits[0].arguments)}"
        elif calls:
            given = _with(calls[0].arguments) or " without arguments"
            said = f"{self.name} was called, but only{given}"
        else:
            made = sorted({c.name for c in seen.tool_calls})
            said = f"{self.name} was not called (called: {', '.join(made) or 'no tool'})"
        return GradeResult(self.label, bool(hits) == self.called, f"{said}.")


@dataclass(frozen=True)
class OutcomeIs:
    outcome: str

    @property
    def label(self) -> str:
        return f"outcome {self.outcome!r}"

    def grade(self, seen: Transcript) -> GradeResult:
        why = f" ({seen.problem})" if seen.problem and seen.outcome != self.outcome else ""
        return GradeResult(
            self.label, seen.outcome == self.outcome, f"The case ended {seen.outcome}{why}."
        )


@dataclass(frozen=True)
class AtMost:
    """`max_rounds` or `max_tokens`: the case's count within a bound."""

    what: str
    bound: int

    @property
    def label(self) -> str:
        return f"max_{self.what} {self.bound}"

    def grade(self, seen: Transcript) -> GradeResult:
        count = seen.rounds if self.what == "rounds" else seen.tokens
        what = self.what if count != 1 else self.what[:-1]
        return GradeResult(self.label, count <= self.bound, f"The case used {count} {what}.")


@dataclass(frozen=True)
class Judge:
    """The model-graded grader: a model of the deployment is asked `question` about the
    case's conversation and answers PASS or FAIL on its first line."""

    question: str

    @property
    def label(self) -> str:
        return f"judge {self.question!r}"


Deterministic = ReplyContains | ReplyLacks | ReplyMatches | ToolUse | OutcomeIs | AtMost
Grader = Deterministic | Judge


def verdict_of(label: str, answer: str) -> GradeResult:
    """The judge's answer, read strictly: its first line is exactly PASS or FAIL; anything
    else is no verdict, and the grade fails saying so."""
    lines = answer.strip().splitlines()
    first = lines[0].strip() if lines else ""
    why = " ".join(line.strip() for line in lines[1:] if line.strip())
    if first in ("PASS", "FAIL"):
        said = f"The judge answered {first}" + (f": {why}" if why else ".")
        return GradeResult(label, first == "PASS", said if said.endswith(".") else said + ".")
    return GradeResult(
        label,
        False,
        f"The judge gave no verdict (its first line must be PASS or FAIL): {_quoted(answer)}.",
    )


def conversation(seen: Transcript) -> str:
    """The case's messages and replies, as the judge reads them: each one a JSON string, so
    a reply cannot end its quote and speak to the judge in the grader's voice (a reply
    that says "PASS" or "ignore the question" stays inside its quotes)."""
    parts = []
    for index, text in enumerate(seen.messages):
        parts.append(f"User: {json.dumps(text, ensure_ascii=False)}")
        reply = seen.replies[index] if index < len(seen.replies) else ""
        parts.append(f"Agent: {json.dumps(reply, ensure_ascii=False) if reply else '(no reply)'}")
    return "\n".join(parts)
