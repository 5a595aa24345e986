"""`teaspill up --detach`, `send`, `tail`, `status` and `down`, as a person runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from services.executor.scripted import script
from services.stack import isolated_settings, settings_env

pytestmark = pytest.mark.durable

SPEC = """
kind = "clerk"
instructions = "Follow the script."
model = "script"
tools = ["calculator"]
"""


def teaspill(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a ceiling for `up`, which starts every part
        check=False,
    )


def alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_send_tail_status_down(tmp_path: Path) -> None:
    env = {**os.environ, **settings_env(isolated_settings(tmp_path / "home"))}
    spec = tmp_path / "clerk.toml"
    spec.write_text(SPEC)
    up = teaspill(env, "up", "--detach")
    assert up.returncode == 0, up.stderr
    pids = json.loads((tmp_path / "home" / "stack.json").read_text())["pids"]
    try:
        assert "Starting the gateway" in up.stdout
        assert os.path.ismount(tmp_path / "home" / "workspaces"), "the endpoint mounts the image"
        assert teaspill(env, "status").returncode == 0
        again = teaspill(env, "up", "--detach")
        assert again.returncode == 0, again.stderr
        assert "is already running" in again.stdout
        assert "Starting" not in again.stdout
        text = script(
            {"calls": [{"name": "calculator", "arguments": {"expression": "7*6"}}]},
            {"reply": "It is {results}."},
        )
        sent = teaspill(env, "send", "acme.clerk", text, "--spec", str(spec))
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.strip() == "It is 42."
        tail = teaspill(env, "tail", "acme.clerk", "--after", "2")
        assert [line.split()[0] for line in tail.stdout.splitlines()] == ["#3", "#4", "#5", "#6"]
        assert "calculator → ok: 42" in tail.stdout
        key = live_text_reaches_followers(env)
        approval_and_stop_through_the_gateway(env, tmp_path, key)
    finally:
        down = teaspill(env, "down")
    assert down.returncode == 0, down.stderr
    assert not [name for name, pid in pids.items() if alive(pid)]
    assert not os.path.ismount(tmp_path / "home" / "workspaces"), "down unmounts it"
    stopped = teaspill(env, "status")
    assert stopped.returncode == 1
    assert stopped.stdout.count("down") == 4


def sse_frames(url: str, key: str, until: str, connected: threading.Event) -> list[tuple[str, str]]:
    """(event, data) of each frame, until an event of type `until`. `connected` is set once
    the gateway answered; the stream's first act is to register the follower, well within
    the second the scripted reply sleeps before its text."""
    frames: list[tuple[str, str]] = []
    headers = {"authorization": f"Bearer {key}"}
    with httpx.stream("GET", url, headers=headers, timeout=60) as response:
        connected.set()
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                frames.append((event, line.removeprefix("data: ")))
                if event == until:
                    return frames
    return frames


def live_text_reaches_followers(env: dict[str, str]) -> str:
    """The executor pushes the reply's text to the gateway as it is written (the stack
    made up a live token), and a follower sees it before the recorded message."""
    created = teaspill(env, "keys", "create", "acme", "--scope", "admin")
    key = created.stdout.strip().splitlines()[-1]
    gateway = f"http://127.0.0.1:{env['TEASPILL_GATEWAY_PORT']}"
    result: list[list[tuple[str, str]]] = []
    url = f"{gateway}/v1/agents/acme.clerk/events?after=6"
    connected = threading.Event()
    follower = threading.Thread(
        target=lambda: result.append(sse_frames(url, key, "turn_ended", connected))
    )
    follower.start()
    assert connected.wait(60), "the follower did not connect"
    slow = script({"sleep": 1.0, "reply": "written live, piece by piece"})
    assert teaspill(env, "send", "acme.clerk", slow).returncode == 0
    follower.join(timeout=60)
    frames = result[0]
    kinds = [event for event, _ in frames]
    assert "delta" in kinds
    assert kinds.index("delta") < kinds.index("model_message")
    deltas = [json.loads(data) for event, data in frames if event == "delta"]
    assert "".join(d["text"] for d in deltas) == "written live, piece by piece"
    return key


ASKING = """
kind = "careful"
instructions = "Follow the script."
model = "script"
[tools]
calculator = "ask"
"""


def approval_and_stop_through_the_gateway(env: dict[str, str], tmp_path: Path, key: str) -> None:
    spec = tmp_path / "careful.toml"
    spec.write_text(ASKING)
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "5*5"}}]},
        {"reply": "approved: {results}"},
    )
    waiting = teaspill(env, "send", "acme.careful", text, "--spec", str(spec))
    assert waiting.returncode == 0, waiting.stderr
    assert waiting.stdout.strip() == (
        "The turn waits for approval t1r1-call_0: "
        "`teaspill approve acme.careful t1r1-call_0` (or --deny)."
    )
    gateway = f"http://127.0.0.1:{env['TEASPILL_GATEWAY_PORT']}/v1/agents/acme.careful"
    auth = {"authorization": f"Bearer {key}"}
    answer = httpx.post(f"{gateway}/approvals/t1r1-call_0", json={"approve": True}, headers=auth)
    assert answer.status_code == 202, answer.text
    again = httpx.post(f"{gateway}/approvals/t1r1-call_0", json={"approve": True}, headers=auth)
    deadline = time.monotonic() + 30
    while "approved: 25" not in teaspill(env, "tail", "acme.careful").stdout:
        assert time.monotonic() < deadline, "the approved turn did not finish"
        time.sleep(0.2)
    assert again.status_code in (202, 409)
    late = httpx.post(f"{gateway}/approvals/t1r1-call_0", json={"approve": True}, headers=auth)
    assert late.status_code == 409
    idle = httpx.post(f"{gateway}/stop", headers=auth)
    assert idle.status_code == 202, idle.text
    while "a stop was refused" not in teaspill(env, "tail", "acme.careful").stdout:
        assert time.monotonic() < deadline + 30, "the stop's outcome was not recorded"
        time.sleep(0.2)
