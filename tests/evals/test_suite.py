"""An eval file is read and checked before anything is sent: every mistake is a sentence
naming where it is and what is accepted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.evals.graders import AtMost, Judge, OutcomeIs, ReplyMatches, ToolUse
from services.evals.suite import EvalFileError, load_suite

GOOD = """
spec = "clerk.toml"
threshold = 0.8
concurrency = 2
timeout = 60

[judge]
model = "smollm2"

[[cases]]
name = "adds"
messages = ["what is 2+2?"]
expect = [
  { tool_called = "calculator", arguments = { expression = "2+2" } },
  { reply_matches = "\\\\b4\\\\b" },
  { outcome = "succeeded" },
  { max_rounds = 2 },
  { judge = "Does the reply give the sum?" },
]

[[cases]]
name = "greets"
messages = ["hi", "bye"]
spec = "other.toml"
expect = [{ tool_not_called = "calculator" }]
"""


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(text)
    return path


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(EvalFileError) as caught:
        load_suite(written(tmp_path, text))
    return str(caught.value)


def test_a_good_file_reads_as_its_cases_and_graders(tmp_path: Path) -> None:
    suite = load_suite(written(tmp_path, GOOD))
    assert (suite.threshold, suite.concurrency, suite.timeout) == (0.8, 2, 60.0)
    assert suite.spec == tmp_path / "clerk.toml"
    assert suite.tenant == "evals"
    assert suite.judge_model == "smollm2"
    adds, greets = suite.cases
    assert adds.messages == ("what is 2+2?",)
    assert adds.expect[0] == ToolUse("calculator", True, {"expression": "2+2"})
    assert isinstance(adds.expect[1], ReplyMatches)
    assert adds.expect[1].pattern.pattern == r"\b4\b"
    assert adds.expect[2:] == (
        OutcomeIs("succeeded"),
        AtMost("rounds", 2),
        Judge("Does the reply give the sum?"),
    )
    assert greets.spec == tmp_path / "other.toml"
    assert greets.expect == (ToolUse("calculator", called=False),)
    assert len(suite.digest) == 64


def test_an_unknown_grader_is_named_with_the_closest_one(tmp_path: Path) -> None:
    said = refusal(
        tmp_path,
        'spec = "s.toml"\n[[cases]]\nname = "a"\nmessages = ["x"]\n'
        'expect = [{ reply_contain = "x" }]\n',
    )
    assert "'cases[0].expect[0]' names an unknown grader 'reply_contain'." in said
    assert "Did you mean 'reply_contains'?" in said
    assert "Graders: reply_contains, reply_lacks" in said


def test_wrong_types_and_missing_fields_are_all_reported_at_once(tmp_path: Path) -> None:
    said = refusal(
        tmp_path,
        'threshold = "high"\nconcurrency = 2.5\n[[cases]]\nmessages = "hi"\n'
        'expect = [{ max_rounds = "two" }, { outcome = "won" }]\n',
    )
    assert said.startswith(f"The eval file {tmp_path / 'suite.toml'}: ")
    for sentence in (
        "'cases[0].name' is missing.",
        "'cases[0].messages' must be a list of one or more texts, sent in order.",
        "'cases[0].expect[0].max_rounds' must be a whole number from 0, not 'two'.",
        "'cases[0].expect[1].outcome' is 'won'; it must be one of succeeded, failed,",
        "'threshold' must be a number from 0 to 1, not text ('high').",
        "'concurrency' must be a whole number from 1 to 32, not a number (2.5).",
        "no spec: give the file a spec",
    ):
        assert sentence in said, said
    assert re.search(r"^The eval file .*: 7 problems\. \(1\) ", said)


def test_unknown_fields_a_judge_without_a_model_and_a_bad_pattern(tmp_path: Path) -> None:
    said = refusal(
        tmp_path,
        'spec = "s.toml"\nthreshhold = 1\n[[cases]]\nname = "a"\nmessages = ["x"]\n'
        'expect = [{ judge = "ok?" }, { reply_matches = "(" },'
        ' { outcome = "failed", max_rounds = 1 }]\n'
        '[[cases]]\nname = "a"\nmessages = ["y"]\nexpect = [{ outcome = "failed" }]\n',
    )
    for sentence in (
        "unknown field 'threshhold'. Did you mean 'threshold'?",
        "'cases[0].expect[0]' is a judge, but the file has no [judge] table naming its model.",
        "'cases[0].expect[1].reply_matches' is not a regular expression:",
        "'cases[0].expect[2]' names 2 graders (outcome, max_rounds).",
        "two cases are named 'a': each case needs a name of its own.",
    ):
        assert sentence in said, said


def test_a_file_that_is_not_toml_or_has_no_cases(tmp_path: Path) -> None:
    assert "is not valid TOML" in refusal(tmp_path, "cases = [")
    assert "it needs cases: one [[cases]] table per case" in refusal(tmp_path, 'spec = "s.toml"\n')
    with pytest.raises(EvalFileError, match=r"^Cannot read the eval file .*nothing\.toml: "):
        load_suite(tmp_path / "nothing.toml")
