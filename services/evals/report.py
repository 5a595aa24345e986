"""What a run found: the JSON it writes, the table it prints, and two runs compared."""

from __future__ import annotations

from pathlib import Path

import msgspec

from services.cli.table import table
from services.evals.graders import GradeResult


class CaseResult(msgspec.Struct, frozen=True):
    name: str
    address: str
    """The fresh agent the case ran in: `teaspill tail ADDRESS` shows its timeline."""
    passed: bool
    outcome: str
    reply: str
    rounds: int
    tokens: int
    seconds: float
    """How long the case's turns took, from its first message to its last turn's end
    (the judge's time not counted)."""
    grades: tuple[GradeResult, ...]
    spec: str = ""
    """`kind@sha256-prefix` of the spec the case ran with."""


class EvalReport(msgspec.Struct, frozen=True):
    file: str
    digest: str
    """sha256 of the eval file: two runs of one file carry the same."""
    started: str
    threshold: float
    passed: int
    total: int
    cases: tuple[CaseResult, ...]

    @property
    def score(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def gated(self) -> bool:
        """At or above the threshold."""
        return self.score >= self.threshold


class ReportError(ValueError):
    """A results file that cannot be read; the message says why."""


def write_report(report: EvalReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report)) + b"\n")


def read_report(path: Path) -> EvalReport:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ReportError(f"Cannot read the results file {path}: {error.strerror}.") from error
    try:
        return msgspec.json.decode(data, type=EvalReport)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ReportError(
            f"{path} is not a results file of `teaspill eval run` (written with --out)."
        ) from error


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def _failures(case: CaseResult) -> str:
    failed = [g for g in case.grades if not g.passed]
    return "; ".join(f"{g.grader}: {g.detail}" for g in failed) or "-"


def render(report: EvalReport) -> str:
    rows = [
        (
            c.name,
            "pass" if c.passed else "FAIL",
            c.outcome,
            c.rounds,
            c.tokens,
            f"{c.seconds:.1f}",
            _failures(c),
        )
        for c in report.cases
    ]
    heading = ("CASE", "RESULT", "OUTCOME", "ROUNDS", "TOKENS", "SECONDS", "FAILED GRADERS")
    return table(heading, rows)


def summary(report: EvalReport) -> str:
    verdict = "at or above it" if report.gated else "below it"
    return (
        f"{report.passed} of {report.total} cases passed ({_percent(report.score)}); the "
        f"threshold is {_percent(report.threshold)}: {verdict}."
    )


def failed_lines(report: EvalReport) -> list[str]:
    """One sentence per failed grader, naming its case: what CI logs show."""
    return [
        f"case {c.name!r} failed {g.grader}: {g.detail}"
        for c in report.cases
        for g in c.grades
        if not g.passed
    ]


def compare(before: EvalReport, after: EvalReport) -> tuple[str, bool]:
    """A table of each case in the two runs, and whether a case that passed before fails
    after (a regression)."""
    old = {c.name: c for c in before.cases}
    new = {c.name: c for c in after.cases}
    names = [*old, *(n for n in new if n not in old)]
    rows = []
    broke = False
    for name in names:
        a, b = old.get(name), new.get(name)
        change = _change(a, b)
        broke = broke or change == "broke"
        rows.append(
            (name, _state(a), _state(b), change, _delta(a, b, "tokens"), _delta(a, b, "rounds"))
        )
    lines = [table(("CASE", "A", "B", "CHANGE", "TOKENS", "ROUNDS"), rows)]
    if before.digest != after.digest:
        lines.append("The two runs are of different eval files: cases are matched by name.")
    lines.append(
        f"A: {before.passed} of {before.total} ({_percent(before.score)}); "
        f"B: {after.passed} of {after.total} ({_percent(after.score)})."
    )
    return "\n".join(lines), broke


def _state(case: CaseResult | None) -> str:
    if case is None:
        return "-"
    return "pass" if case.passed else "FAIL"


def _change(a: CaseResult | None, b: CaseResult | None) -> str:
    if a is None:
        return "new"
    if b is None:
        return "gone"
    if a.passed == b.passed:
        return "same"
    return "fixed" if b.passed else "broke"


def _delta(a: CaseResult | None, b: CaseResult | None, what: str) -> str:
    if a is None or b is None:
        return "-"
    x, y = getattr(a, what), getattr(b, what)
    return f"{x} -> {y}" if x != y else str(x)
