"""`teaspill up`, `down` and `status`: the whole local stack."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

import httpx

from schemas.spec import AgentSpec
from services.cli import talk
from services.cli.gateway import Doors
from services.settings import Settings
from services.stack import Stack
from services.stack.gateway import local_url
from services.stack.process import answers

RUN_FILE = "stack.json"


def run_file(settings: Settings) -> Path:
    return settings.home / RUN_FILE


def start(settings: Settings) -> Stack:
    """Start every part, saying what it does; a live token is made up for this stack
    unless one is set, so the execution plane can push live text to the gateway."""
    token = settings.live_token or secrets.token_urlsafe(24)
    stack = Stack(settings, env={"TEASPILL_LIVE_TOKEN": token}).up(print)
    _record(settings, stack)
    return stack


def up(settings: Settings, spec: AgentSpec, args: argparse.Namespace) -> int:
    """Start the stack; then chat with `args.agent`, serve until Ctrl-C, or (`--detach`)
    leave it running."""
    running = start(settings)
    if args.detach:
        print(
            f"The stack is up; `teaspill send {args.agent} 'hello' --spec {args.spec}` talks "
            "to it and `teaspill down` stops it."
        )
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if args.no_chat or not sys.stdin.isatty():
            print("The stack is up. Ctrl-C stops it.")
            signal.pause()
        else:
            doors = Doors(settings)
            try:
                talk.chat(doors.agent(args.agent), args.agent, spec)
            finally:
                doors.close()
    except KeyboardInterrupt:
        pass
    finally:
        print("Stopping the stack")
        running.down()
        run_file(settings).unlink(missing_ok=True)
    return 0


def _record(settings: Settings, stack: Stack) -> None:
    pids = {
        "gateway": stack.gateway.pid,
        "restate": stack.restate.pid,
        "endpoint": stack.endpoint.pid,
    }
    run_file(settings).write_text(json.dumps(pids))


def down(settings: Settings) -> int:
    """Stop a stack started with `up --detach`: SIGTERM each part, in the order
    `Stack.down` uses."""
    path = run_file(settings)
    if not path.exists():
        print(f"No stack is recorded in {settings.home}; nothing to stop.")
        return 0
    pids: dict[str, int | None] = json.loads(path.read_text())
    for name in ("gateway", "restate", "endpoint"):
        pid = pids.get(name)
        if pid is not None and _signal_group(pid, signal.SIGTERM):
            print(f"Stopping {name} (pid {pid})")
            _wait_gone(pid)
    path.unlink()
    return 0


def _signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the group; False if no process of it is left (0 only checks)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _signal_group(pid, 0):
        time.sleep(0.1)


def status(settings: Settings) -> int:
    parts = {
        "restate-server": f"{settings.admin_url}/health",
        "ingress": f"{settings.ingress_url}/restate/health",
        "endpoint": f"{settings.endpoint_url}/health",
        "gateway": f"{local_url(settings)}/v1/health",
    }
    healthy = True
    for name, url in parts.items():
        ok = answers(url)
        # The gateway answers 503 until the projection has its first event: it is up.
        waiting = name == "gateway" and not ok and answers(url, httpx.codes.SERVICE_UNAVAILABLE)
        healthy &= ok or waiting
        state = "up" if ok else "up (no agent has run yet)" if waiting else "down"
        print(f"{name:15} {state:5} {url}")
    return 0 if healthy else 1
