"""A stack started with a models file on other ports than the defaults, then used from a
shell that shares only its home: the CLI finds the stack in the home and asks the running
deployment what it offers, and a turn that falls back to another model reads as such."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.executor.scripted import script
from services.stack import isolated_settings, settings_env
from tests.durable.test_cli_stack import teaspill

pytestmark = pytest.mark.durable

MODELS = """
[models.faraway]
base_url = "http://127.0.0.1:9/v1"
model = "nobody-serves-this"
trust = "local"
timeout = 5
"""

SPEC = """
kind = "hopeful"
instructions = "Follow the script."
model = "faraway"
fallback = ["script"]
"""


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """`teaspill up --detach` with a models file and free ports; the shell a later command
    runs in has the home only (and, as every shell, no scripted-model or models variable)."""
    tmp = tmp_path_factory.mktemp("newcomer")
    models = tmp / "models.toml"
    models.write_text(MODELS)
    settings = isolated_settings(tmp / "home")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("TEASPILL_")}
    starting = {**plain, **settings_env(settings), "TEASPILL_MODELS_FILE": str(models)}
    up = teaspill(starting, "up", "--detach")
    assert up.returncode == 0, up.stderr
    later = {**plain, "TEASPILL_HOME": str(settings.home)}
    try:
        yield later, tmp
    finally:
        down = teaspill(later, "down")
        assert down.returncode == 0, down.stderr


def test_status_finds_every_part_from_a_shell_with_only_the_home(
    started: tuple[dict[str, str], Path],
) -> None:
    env, _ = started
    status = teaspill(env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert ":8000" not in status.stdout
    assert ":8080" not in status.stdout
    assert [line.split()[1] for line in status.stdout.splitlines()] == ["up"] * len(
        status.stdout.splitlines()
    )
    again = teaspill(env, "up", "--detach")
    assert "is already running" in again.stdout


def test_a_spec_naming_a_model_of_the_models_file_publishes(
    started: tuple[dict[str, str], Path],
) -> None:
    env, tmp = started
    spec = tmp / "hopeful.toml"
    spec.write_text(SPEC)
    published = teaspill(env, "specs", "publish", "acme", str(spec))
    assert published.returncode == 0, published.stderr
    assert published.stdout == "Published hopeful version 1 for acme.\n"
    offered = teaspill(env, "deployment", "acme")
    assert "faraway" in offered.stdout
    assert "hopeful" in offered.stdout


def test_a_fallback_is_shown_by_send_timeline_and_by_tail(
    started: tuple[dict[str, str], Path],
) -> None:
    env, tmp = started
    spec = tmp / "hopeful.toml"
    spec.write_text(SPEC)
    text = script({"reply": "hello from the fallback"})
    sent = teaspill(env, "send", "acme.fb", text, "--spec", str(spec), "--timeline")
    assert sent.returncode == 0, sent.stderr
    assert "Traceback" not in sent.stdout + sent.stderr
    assert "faraway failed, the round starts again on script" in sent.stdout
    assert sent.stdout.strip().endswith("hello from the fallback")
    tail = teaspill(env, "tail", "acme.fb")
    assert tail.returncode == 0, tail.stderr
    assert "Traceback" not in tail.stdout + tail.stderr
    assert "faraway failed, the round starts again on script" in tail.stdout
    unasked = teaspill(env, "approve", "acme.fb", "t1r1-call_9")
    assert unasked.returncode == 1
    assert "`teaspill tail acme.fb` shows the approvals it asked for" in unasked.stderr


def test_a_missing_agent_is_not_shown_as_idle(started: tuple[dict[str, str], Path]) -> None:
    env, _ = started
    shown = teaspill(env, "agents", "show", "acme.ghost")
    assert shown.returncode == 1
    assert shown.stdout == ""
    assert shown.stderr.startswith("teaspill: there is no agent acme.ghost: ")
    assert "`teaspill agents list acme`" in shown.stderr
    stopped = teaspill(env, "stop", "acme.ghost")
    assert stopped.returncode == 1
    assert "there is no agent acme.ghost" in stopped.stderr
    unknown = teaspill(env, "send", "acme.newbie", "hi", "--kind", "nosuch")
    assert unknown.returncode == 1
    assert "`teaspill specs publish acme" in unknown.stderr
    assert "POST /v1/specs" not in unknown.stderr
    kindless = teaspill(env, "send", "acme.newbie", "hi")
    assert kindless.returncode == 1
    assert "--kind KIND" in kindless.stderr
