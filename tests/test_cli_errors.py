"""What a user can get wrong reaches them as a sentence: every command with the stack
down, bad settings, a plugin module or model file that cannot be used."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import httpx
import msgspec
import pytest

from services.cli.errors import explain
from services.cli.main import main, parser
from services.cli.reference import _commands
from services.client import ApiError
from services.ingress import IngressError
from services.settings import ConfigError, Settings, load_settings
from services.stack import StackError, isolated_settings, settings_env

ROOT = Path(__file__).resolve().parents[1]

SAMPLES = {
    "address": "acme.helper",
    "tenant": "acme",
    "text": "hello",
    "file": str(ROOT / "examples" / "assistant.toml"),
    "request_id": "t1r1-call_0",
    "key_id": "abcdefabcdef",
    "schedule_id": "s1",
    "template": "Build {{ id }}",
    "hook_id": "acme.0123456789abcdef0123",
    "eval_file": str(ROOT / "examples" / "assistant-evals.toml"),
    "seq": "3",
    "new": "acme.branch",
    "document_id": "doc0123456789abcdef0123",
    "query": "tide",
}
OPTIONS = {
    "teaspill schedules add": ["--every", "1h"],
    "teaspill users set": ["--algorithm", "HS256", "--key-file", SAMPLES["file"]],
}
"""Options a command cannot run without."""

NEEDS_NO_STACK = {
    "teaspill up": "starts the stack: with none running there is nothing wrong",
    "teaspill env": "prints the addresses a stack of this home uses, running or not",
    "teaspill eval compare": "reads two results files: no stack is involved",
    "teaspill backup create": "backs up a home whose stack is down as it is",
    "teaspill backup restore": "writes a fresh home from a file: no stack is involved",
}


def runnable_commands() -> list[list[str]]:
    """Every leaf command, with a sample for each positional argument."""
    found = []
    for name, command in _commands(parser(), "teaspill")[1:]:
        if any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
            continue
        if name in NEEDS_NO_STACK:
            continue
        positional = [a.dest for a in command._actions if not a.option_strings]
        samples = [SAMPLES[dest] for dest in positional]
        found.append([*name.split()[1:], *samples, *OPTIONS.get(name, [])])
    return found


@pytest.fixture
def stack_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose every port is free: nothing answers there."""
    settings = isolated_settings(tmp_path / "home")
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)
    return settings


@pytest.mark.parametrize("argv", runnable_commands(), ids=" ".join)
def test_every_command_with_the_stack_down_says_so_in_a_sentence(
    argv: list[str], stack_down: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code != 0
    assert "Traceback" not in out + err
    if argv[0] == "status":
        assert "down" in out
        return
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 2, err
    assert lines[0].startswith("teaspill: ")
    assert ("is the stack running?" in err and "teaspill up" in err) or "nothing to stop" in err


def test_a_malformed_address_is_one_sentence_before_anything_is_reached(
    stack_down: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["send", "Bad Address!", "hi"]) == 2
    out, err = capsys.readouterr()
    assert err == (
        "teaspill: agent address 'Bad Address!' needs a tenant and a name, as in 'acme.helper'.\n"
    )
    assert out == ""


@pytest.mark.parametrize("answers", ["[1]", "{not json", '{"quantity": 3}'])
def test_answers_that_are_not_an_object_per_question_are_one_sentence(
    stack_down: Settings, capsys: pytest.CaptureFixture[str], answers: str
) -> None:
    assert main(["approve", "acme.shop", "t1r1-call_0-input1", "--answers", answers]) == 2
    out, err = capsys.readouterr()
    assert err == (
        "teaspill: --answers takes a JSON object with an object of values per question key, "
        """e.g. '{"quantity": {"quantity": 3}}'.\n"""
    )
    assert out == ""


@pytest.mark.parametrize(
    "case",
    [
        ("TEASPILL_GATEWAY_PORT", "abc", "TEASPILL_GATEWAY_PORT=abc is not valid: input should"),
        ("TEASPILL_MODEL_CONTEXT", "256", "TEASPILL_MODEL_CONTEXT=256 is not valid: input should"),
        ("TEASPILL_TOOL_MODULES", "[not json", "TEASPILL_TOOL_MODULES"),
    ],
    ids=lambda case: case[0],
)
def test_a_bad_setting_is_one_sentence_naming_the_variable(
    case: tuple[str, str, str],
    stack_down: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    variable, value, sentence = case
    monkeypatch.setenv(variable, value)
    assert main(["status"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"teaspill: {sentence}")
    assert len(err.strip().splitlines()) == 1
    assert "pydantic" not in err
    assert "Traceback" not in err


def test_module_settings_take_a_comma_separated_list_or_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEASPILL_TOOL_MODULES", "my_tools")
    monkeypatch.setenv("TEASPILL_MODEL_MODULES", "a.models, b.models")
    monkeypatch.setenv("TEASPILL_OBSERVER_MODULES", '["c.observers"]')
    settings = load_settings()
    assert settings.tool_modules == ("my_tools",)
    assert settings.model_modules == ("a.models", "b.models")
    assert settings.observer_modules == ("c.observers",)


@pytest.mark.parametrize(
    "case",
    [
        ("TEASPILL_MODEL_PATH", "/tmp/nope.gguf", "TEASPILL_MODEL_PATH=/tmp/nope.gguf is not a"),
        ("TEASPILL_TOOL_MODULES", "my_tools", "TEASPILL_TOOL_MODULES names my_tools, which"),
        ("TEASPILL_OBSERVER_MODULES", "json", "TEASPILL_OBSERVER_MODULES names json, which"),
        ("TEASPILL_MODEL_MODULES", "no.such", "TEASPILL_MODEL_MODULES names no.such, which"),
    ],
    ids=lambda case: case[0],
)
def test_up_stops_before_starting_anything_when_the_configuration_is_wrong(
    case: tuple[str, str, str],
    stack_down: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    variable, value, sentence = case
    monkeypatch.setenv(variable, value)
    started = time.monotonic()
    code = main(["up", "--detach"])
    seconds = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith(f"teaspill: {sentence}"), err
    assert len(err.strip().splitlines()) == 1
    assert "Starting" not in out
    assert not (stack_down.home / "logs").exists(), "no part was started"
    assert not (stack_down.home / "stack.json").exists()
    assert seconds < 5, "nothing is waited for or retried"


def request(url: str = "http://127.0.0.1:9/x") -> httpx.Request:
    return httpx.Request("POST", url)


@pytest.mark.parametrize(
    ("error", "words", "code"),
    [
        (httpx.ConnectError("refused", request=request()), "nothing answers at", 1),
        (httpx.ReadTimeout("slow", request=request()), "did not answer in time", 1),
        (httpx.RemoteProtocolError("closed", request=request()), "talking to", 1),
        (IngressError(404, "service 'Agent' not found"), "`teaspill up` registers it", 1),
        (IngressError(400, "bad address"), "refused: bad address (400).", 1),
        (ApiError(404, "unknown agent acme.x."), "refused: unknown agent acme.x (404).", 1),
        (ApiError(0, "the gateway at http://g does not answer"), "teaspill up --detach", 1),
        (ConfigError("TEASPILL_X=1 is not valid."), "TEASPILL_X=1 is not valid.", 2),
        (StackError("Port 1 is in use."), "Port 1 is in use.", 1),
        (msgspec.ValidationError("Expected `int`"), "another version?", 1),
        (PermissionError(13, "Permission denied", "/x"), "Permission denied (/x).", 1),
    ],
)
def test_the_boundary_explains_what_a_user_can_cause(
    error: Exception, words: str, code: int
) -> None:
    explained = explain(error)
    assert explained is not None
    sentence, exit_code = explained
    assert words in sentence
    assert exit_code == code
    assert "\n" not in sentence
    assert type(error).__name__ not in sentence
    for library_words in ("closed", "Expected `int`"):
        assert library_words not in sentence


def test_a_bug_is_not_dressed_as_a_sentence_a_user_caused() -> None:
    assert explain(KeyError("spec")) is None


@pytest.mark.parametrize("name", ["alice\n", "a" * 61, "bob;rm"])
def test_a_key_name_that_cannot_be_used_is_refused_before_anything_is_reached(
    name: str, stack_down: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "acme", "--name", name]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("teaspill: The key name ")
    assert "up to 60 letters, digits" in err
