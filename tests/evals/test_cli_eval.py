"""`teaspill eval` refuses what it cannot use with a sentence and exit code 2, before it
reaches any stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.cli.main import main


def test_a_bad_eval_file_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEASPILL_HOME", str(tmp_path / "home"))
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'spec = "clerk.toml"\n[[cases]]\nname = "a"\nmessages = ["x"]\n'
        'expect = [{ sounds_nice = "x" }]\n'
    )
    assert main(["eval", "run", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"teaspill: The eval file {bad}: 'cases[0].expect[0]' names an unknown grader "
        "'sounds_nice'. Graders: reply_contains, reply_lacks, reply_matches, tool_called, "
        "tool_not_called, outcome, max_rounds, max_tokens, judge.\n"
    )


def test_a_file_that_is_not_a_results_file_is_refused_by_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEASPILL_HOME", str(tmp_path / "home"))
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    assert main(["eval", "compare", str(other), str(other)]) == 2
    assert capsys.readouterr().err == (
        f"teaspill: {other} is not a results file of `teaspill eval run` (written with --out).\n"
    )
