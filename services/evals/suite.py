"""An eval file: TOML, read and checked before anything is sent.

Every problem of the file is reported at once, each as a sentence naming where it is
(`cases[2].expect[0]`), what was found and what is accepted.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.evals.graders import (
    OUTCOMES,
    AtMost,
    Grader,
    Judge,
    OutcomeIs,
    ReplyContains,
    ReplyLacks,
    ReplyMatches,
    ToolUse,
)

TENANT = "evals"
"""Where a file's agents run unless it names another tenant: its specs are published
there, away from the agents people use."""
SEGMENT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}\Z")
MAX_CONCURRENCY = 32


class EvalFileError(ValueError):
    """An eval file that cannot be run; the message says every problem it has."""


@dataclass(frozen=True)
class Case:
    name: str
    messages: tuple[str, ...]
    expect: tuple[Grader, ...]
    spec: Path | None = None
    """The case's own spec file, when it names one; else the file's."""


@dataclass(frozen=True)
class Suite:
    path: Path
    digest: str
    """sha256 of the file's bytes: two runs of one file carry the same."""
    cases: tuple[Case, ...]
    spec: Path | None = None
    threshold: float = 1.0
    concurrency: int = 4
    timeout: float = 300.0
    tenant: str = TENANT
    judge_model: str = ""
    """The model that answers `judge` graders; empty when the file has no [judge]."""


TOP = ("spec", "threshold", "concurrency", "timeout", "tenant", "judge", "cases")
CASE = ("name", "messages", "spec", "expect")
GRADERS = (
    "reply_contains",
    "reply_lacks",
    "reply_matches",
    "tool_called",
    "tool_not_called",
    "outcome",
    "max_rounds",
    "max_tokens",
    "judge",
)


class _FileProblems:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[str] = []

    def add(self, sentence: str) -> None:
        self.found.append(sentence)

    def raise_any(self) -> None:
        if not self.found:
            return
        if len(self.found) == 1:
            raise EvalFileError(f"The eval file {self.path}: {self.found[0]}")
        listed = " ".join(f"({n}) {p}" for n, p in enumerate(self.found, start=1))
        raise EvalFileError(f"The eval file {self.path}: {len(self.found)} problems. {listed}")


def load_suite(path: Path) -> Suite:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise EvalFileError(f"Cannot read the eval file {path}: {error.strerror}.") from error
    try:
        raw = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise EvalFileError(f"The eval file {path} is not valid TOML: {error}.") from error
    return parse_suite(raw, path, hashlib.sha256(data).hexdigest())


def parse_suite(raw: dict[str, Any], path: Path, digest: str = "") -> Suite:
    problems = _FileProblems(path)
    _unknown(raw, TOP, "", "An eval file has", problems)
    get = _Getter(raw, "", problems)
    judge = raw.get("judge")
    judge_model = ""
    if judge is not None:
        if isinstance(judge, dict):
            _unknown(judge, ("model",), "judge.", "[judge] has", problems)
            judge_model = _Getter(judge, "judge.", problems).text("model", required=True)
        else:
            problems.add("'judge' must be a table with the judge's model, as [judge] model = ...")
    spec = get.text("spec")
    cases = _cases(raw.get("cases"), path.parent, problems, judged=bool(judge_model))
    if spec == "" and cases and any(c.spec is None for c in cases):
        problems.add('no spec: give the file a spec = "FILE" (or every case one of its own).')
    suite = Suite(
        path=path,
        digest=digest,
        cases=tuple(cases),
        spec=path.parent / spec if spec else None,
        threshold=get.number("threshold", 1.0, 0.0, 1.0),
        concurrency=int(get.number("concurrency", 4, 1, MAX_CONCURRENCY, whole=True)),
        timeout=get.number("timeout", 300.0, 1.0, 86_400.0),
        tenant=get.text("tenant") or TENANT,
        judge_model=judge_model,
    )
    if not SEGMENT.match(suite.tenant):
        problems.add(
            f"'tenant' ({suite.tenant!r}) must be 1 to 48 of a-z 0-9 - _, starting with a "
            "letter or digit."
        )
    problems.raise_any()
    return suite


def _unknown(
    raw: dict[str, Any], known: tuple[str, ...], where: str, what: str, problems: _FileProblems
) -> None:
    for name in sorted(set(raw) - set(known)):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" Did you mean '{where}{close[0]}'?" if close else ""
        problems.add(f"unknown field '{where}{name}'.{hint} {what}: {', '.join(known)}.")


_KINDS = {str: "text", bool: "true or false", int: "a whole number", float: "a number"}


def _kind_of(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return _KINDS.get(type(value), type(value).__name__)


class _Getter:
    """Typed fields of one table, each wrong one added to `problems` (no coercion)."""

    def __init__(self, raw: dict[str, Any], where: str, problems: _FileProblems) -> None:
        self.raw, self.where, self.problems = raw, where, problems

    def _wrong(self, name: str, wanted: str) -> None:
        value = self.raw[name]
        self.problems.add(
            f"'{self.where}{name}' must be {wanted}, not {_kind_of(value)} ({value!r})."
        )

    def text(self, name: str, *, required: bool = False) -> str:
        if name not in self.raw:
            if required:
                self.problems.add(f"'{self.where}{name}' is missing.")
            return ""
        value = self.raw[name]
        if not isinstance(value, str) or not value.strip():
            self._wrong(name, "non-empty text")
            return ""
        return value

    def number(
        self, name: str, default: float, low: float, high: float, *, whole: bool = False
    ) -> float:
        if name not in self.raw:
            return default
        value = self.raw[name]
        fits = type(value) is int or (type(value) is float and not whole)
        if not fits or not low <= value <= high:
            kind = "a whole number" if whole else "a number"
            self._wrong(name, f"{kind} from {low:g} to {high:g}")
            return default
        return float(value)


def _cases(raw: object, base: Path, problems: _FileProblems, *, judged: bool) -> list[Case]:
    if not isinstance(raw, list) or not raw or not all(isinstance(c, dict) for c in raw):
        problems.add("it needs cases: one [[cases]] table per case, with name, messages, expect.")
        return []
    cases = [_case(c, f"cases[{n}].", base, problems, judged) for n, c in enumerate(raw)]
    names = [c.name for c in cases if c.name]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.add(f"two cases are named {name!r}: each case needs a name of its own.")
    return cases


def _case(
    raw: dict[str, Any], where: str, base: Path, problems: _FileProblems, judged: bool
) -> Case:
    _unknown(raw, CASE, where, "A case has", problems)
    get = _Getter(raw, where, problems)
    name = get.text("name", required=True)
    messages = raw.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, str) and m for m in messages)
    ):
        problems.add(f"'{where}messages' must be a list of one or more texts, sent in order.")
        messages = []
    expect = raw.get("expect")
    graders: list[Grader] = []
    if not isinstance(expect, list) or not expect:
        problems.add(f"'{where}expect' must be a list of one or more graders.")
    else:
        for n, entry in enumerate(expect):
            grader = _grader(entry, f"{where}expect[{n}]", problems, judged)
            if grader is not None:
                graders.append(grader)
    spec = get.text("spec")
    return Case(name, tuple(messages), tuple(graders), base / spec if spec else None)


def _grader(raw: object, where: str, problems: _FileProblems, judged: bool) -> Grader | None:
    if not isinstance(raw, dict):
        problems.add(
            f"'{where}' must be a table naming one grader, e.g. {{ outcome = \"succeeded\" }}."
        )
        return None
    named = [key for key in raw if key in GRADERS]
    if len(named) != 1:
        unknown = [key for key in raw if key not in GRADERS and key != "arguments"]
        close = [m for k in unknown for m in difflib.get_close_matches(k, GRADERS, n=1)]
        hint = f" Did you mean '{close[0]}'?" if close else ""
        said = f"names {len(named)} graders ({', '.join(named)})" if named else "names no grader"
        if unknown and not named:
            said = f"names an unknown grader '{unknown[0]}'"
        problems.add(f"'{where}' {said}.{hint} Graders: {', '.join(GRADERS)}.")
        return None
    kind = named[0]
    extra = sorted(set(raw) - {kind, *(("arguments",) if kind.startswith("tool_") else ())})
    if extra:
        problems.add(f"'{where}': {kind} takes no field {', '.join(repr(e) for e in extra)}.")
        return None
    if kind == "judge" and not judged:
        problems.add(f"'{where}' is a judge, but the file has no [judge] table naming its model.")
        return None
    return _BUILD[kind](raw, where, problems)


def _nonempty(raw: dict[str, Any], kind: str, where: str, problems: _FileProblems) -> str | None:
    value = raw[kind]
    if not isinstance(value, str) or not value:
        problems.add(f"'{where}.{kind}' must be non-empty text, not {_kind_of(value)}.")
        return None
    return value


def _text(kind: str, build: Callable[[str], Grader]) -> Callable[..., Grader | None]:
    def made(raw: dict[str, Any], where: str, problems: _FileProblems) -> Grader | None:
        value = _nonempty(raw, kind, where, problems)
        return None if value is None else build(value)

    return made


def _pattern(raw: dict[str, Any], where: str, problems: _FileProblems) -> Grader | None:
    value = _nonempty(raw, "reply_matches", where, problems)
    if value is None:
        return None
    try:
        return ReplyMatches(re.compile(value))
    except re.error as error:
        problems.add(f"'{where}.reply_matches' is not a regular expression: {error}.")
        return None


def _tool(called: bool) -> Callable[..., Grader | None]:
    kind = "tool_called" if called else "tool_not_called"

    def made(raw: dict[str, Any], where: str, problems: _FileProblems) -> Grader | None:
        name = _nonempty(raw, kind, where, problems)
        arguments = raw.get("arguments", {})
        if not isinstance(arguments, dict):
            problems.add(f"'{where}.arguments' must be a table of argument values.")
            return None
        return None if name is None else ToolUse(name, called, arguments)

    return made


def _outcome(raw: dict[str, Any], where: str, problems: _FileProblems) -> Grader | None:
    value = raw["outcome"]
    if value not in OUTCOMES:
        problems.add(f"'{where}.outcome' is {value!r}; it must be one of {', '.join(OUTCOMES)}.")
        return None
    return OutcomeIs(value)


def _bound(what: str) -> Callable[..., Grader | None]:
    def made(raw: dict[str, Any], where: str, problems: _FileProblems) -> Grader | None:
        value = raw[f"max_{what}"]
        if type(value) is not int or value < 0:
            problems.add(f"'{where}.max_{what}' must be a whole number from 0, not {value!r}.")
            return None
        return AtMost(what, value)

    return made


_BUILD: dict[str, Callable[[dict[str, Any], str, _FileProblems], Grader | None]] = {
    "reply_contains": _text("reply_contains", ReplyContains),
    "reply_lacks": _text("reply_lacks", ReplyLacks),
    "reply_matches": _pattern,
    "tool_called": _tool(called=True),
    "tool_not_called": _tool(called=False),
    "outcome": _outcome,
    "max_rounds": _bound("rounds"),
    "max_tokens": _bound("tokens"),
    "judge": _text("judge", Judge),
}
