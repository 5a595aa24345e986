"""`teaspill eval run` through a real stack: the gateway, the agent's wakes, the pipeline
and the executors production uses, graded on the timelines the cases recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas.events import TurnEnded
from services.cli.main import main
from services.stack import Gateway, settings_env
from tests.durable.conftest import LiveStack, eventually

pytestmark = pytest.mark.durable

SPEC = """
kind = "eval-clerk"
instructions = "Be exact."
model = "script"
tools = ["calculator"]
"""

FIVE_CASES = """
spec = "clerk.toml"
concurrency = 3
timeout = 120

[[cases]]
name = "echoes"
messages = ["hello"]
expect = [{ reply_contains = "You said: hello" }, { outcome = "succeeded" }, { max_rounds = 1 }]

[[cases]]
name = "adds with the calculator"
messages = ['''
{"calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]}
{"reply": "The sum is {results}."}
''']
expect = [
  { tool_called = "calculator", arguments = { expression = "2+2" } },
  { reply_matches = "sum is 4\\\\b" },
  { max_rounds = 2 },
]

[[cases]]
name = "follows its instructions"
messages = ['{"reply": "{system}"}']
expect = [{ reply_contains = "Be exact." }]

[[cases]]
name = "answers without tools"
messages = ['{"reply": "No tool needed."}']
expect = [{ tool_not_called = "calculator" }, { max_tokens = 1000 }]

[[cases]]
name = "keeps a conversation"
messages = ["first", "second"]
expect = [{ reply_contains = "You said: second" }, { reply_lacks = "first" }]
"""


@pytest.fixture(scope="module")
def gateway(stack: LiveStack) -> Iterator[Gateway]:
    part = Gateway(stack.settings)
    part.start()
    yield part
    part.stop()


@pytest.fixture
def cli(stack: LiveStack, gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in settings_env(stack.settings).items():
        monkeypatch.setenv(name, value)

    def run(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "clerk.toml").write_text(SPEC)
    path = tmp_path / "clerk-evals.toml"
    path.write_text(FIVE_CASES)
    return path


def test_five_cases_pass_and_a_changed_spec_fails_the_one_it_breaks(
    cli: Any,
    suite: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = tmp_path / "before.json"
    code, out, err = cli("eval", "run", str(suite), "--out", str(before), capsys=capsys)
    assert (code, err) == (0, ""), out
    assert "5 of 5 cases passed (100%); the threshold is 100%: at or above it." in out
    report = json.loads(before.read_text())
    cases = {case["name"]: case for case in report["cases"]}
    assert [c["passed"] for c in cases.values()] == [True] * 5
    assert cases["adds with the calculator"]["rounds"] == 2
    addresses = {c["address"] for c in cases.values()}
    assert len(addresses) == 5
    assert all(a.startswith("evals.") for a in addresses)

    vague = tmp_path / "vague.toml"
    vague.write_text(SPEC.replace("Be exact.", "Be vague."))
    after = tmp_path / "after.json"
    code, out, err = cli(
        "eval", "run", str(suite), "--spec", str(vague), "--out", str(after), capsys=capsys
    )
    assert code == 1
    assert err.startswith(
        "case 'follows its instructions' failed reply_contains 'Be exact.': "
        "The reply does not contain it: 'Be vague."
    ), err
    assert "4 of 5 cases passed (80%); the threshold is 100%: below it." in out
    again = {c["address"] for c in json.loads(after.read_text())["cases"]}
    assert not again & addresses, "a second run gets fresh agents"

    code, out, _ = cli("eval", "compare", str(before), str(after), capsys=capsys)
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("follows its instructions"))
    assert row.split()[3:6] == ["pass", "FAIL", "broke"]
    assert "A: 5 of 5 (100%); B: 4 of 5 (80%)." in out
    assert cli("eval", "compare", str(after), str(before), capsys=capsys)[0] == 0
    # Each followed timeline is closed when its turn ended, not left to the event loop.
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_a_judge_is_asked_in_an_agent_of_its_own_and_read_strictly(
    cli: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scripted model answers the judge `You said: ...`: no verdict, so the grade
    fails and says what the judge wrote."""
    (tmp_path / "clerk.toml").write_text(SPEC)
    judged = tmp_path / "judged.toml"
    judged.write_text(
        'spec = "clerk.toml"\n[judge]\nmodel = "script"\n[[cases]]\nname = "judged"\n'
        'messages = ["hello"]\nexpect = [{ judge = "Is the reply polite?" }]\n'
    )
    out_file = tmp_path / "judged.json"
    code, _, err = cli("eval", "run", str(judged), "--out", str(out_file), capsys=capsys)
    assert code == 1
    assert err.startswith(
        "case 'judged' failed judge 'Is the reply polite?': The judge gave no verdict (its "
        "first line must be PASS or FAIL): 'You said: Question: Is the reply polite?"
    ), err
    [case] = json.loads(out_file.read_text())["cases"]
    assert case["reply"] == "You said: hello"


@pytest.mark.model
def test_the_example_evals_run_end_to_end_on_the_bundled_model(
    cli: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "assistant-evals.toml"
    results = tmp_path / "assistant.json"
    code, out, err = cli("eval", "run", str(example), "--out", str(results), capsys=capsys)
    assert (code, err) == (0, ""), out
    report = json.loads(results.read_text())
    assert [c["outcome"] for c in report["cases"]] == ["succeeded", "succeeded"]
    assert all(c["reply"].strip() and c["tokens"] > 0 for c in report["cases"])
    assert "2 of 2 cases passed (100%)" in out


ASKING_SPEC = """
kind = "eval-asker"
instructions = "Follow the script."
model = "script"
[tools]
calculator = "ask"
"""

SHORT_OF_AN_END = """
spec = "asker.toml"
timeout = 10
# One at a time: the scripted model, like the bundled one, serves one call at a time, and
# the slow case must not hold it while the other asks for its approval.
concurrency = 1

[[cases]]
name = "waits for a person"
messages = ['{"calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}']
expect = [{ outcome = "awaiting_approval" }, { tool_called = "calculator" }]

[[cases]]
name = "too slow"
messages = ['{"sleep": 60, "reply": "late"}']
expect = [{ outcome = "succeeded" }]
"""


def test_a_case_that_waits_for_a_person_or_runs_out_of_time_says_so(
    cli: Any, stack: LiveStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "asker.toml").write_text(ASKING_SPEC)
    path = tmp_path / "short.toml"
    path.write_text(SHORT_OF_AN_END)
    results = tmp_path / "short.json"
    code, out, err = cli("eval", "run", str(path), "--out", str(results), capsys=capsys)
    assert code == 1
    assert err == (
        "case 'too slow' failed outcome 'succeeded': The case ended timed_out (the case did "
        "not finish within 10 s).\n"
    )
    waited, slow = json.loads(results.read_text())["cases"]
    assert (waited["passed"], waited["outcome"]) == (True, "awaiting_approval")
    assert "tool_called 'calculator'" in waited["grades"][1]["grader"]
    assert slow["outcome"] == "timed_out"

    def stopped() -> TurnEnded | None:
        ends = [e.body for e in stack.events(slow["address"]) if isinstance(e.body, TurnEnded)]
        return ends[0] if ends else None

    assert eventually(stopped, 30, "the slow case's turn to end").outcome == "stopped"
    code, out, _ = cli(
        "eval", "run", str(path), "--out", str(results), "--threshold", "0.5", capsys=capsys
    )
    assert code == 0
    assert "1 of 2 cases passed (50%); the threshold is 50%: at or above it." in out
