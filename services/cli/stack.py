"""`teaspill up`, `down` and `status`: the whole local stack."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
from pathlib import Path

from schemas.spec import AgentSpec
from services.cli import home, talk
from services.cli.gateway import Doors
from services.config import check
from services.settings import Settings
from services.stack import Stack, StackError
from services.stack.cluster import Cluster, Layout, find_haproxy, nodes_with_data
from services.stack.gateway import local_url
from services.stack.postgres import find_postgres
from services.workspace.volumes import release

LIVE_TOKEN_FILE = "live-token"  # noqa: S105 - a file name, not the token
STOP_SIGNALS = {"postgres": signal.SIGINT}
"""How `down` stops a part, when not with SIGTERM: PostgreSQL's fast shutdown is SIGINT
(its SIGTERM waits for every session to end)."""
run_file = home.run_file


def start(settings: Settings, *, cluster: bool = False) -> Stack | Cluster:
    """Check the configuration, then start every part (of the cluster layout, with
    `cluster`), saying what it does; a live token is made up for this stack unless one is
    set, so the execution plane can push live text to the gateway."""
    # The parts (`python -m hypercorn`) import plugin modules from the directory they
    # start in, which is this one: check from there too.
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    check(settings)
    _one_kind(settings, cluster=cluster)
    if cluster:
        find_haproxy()  # before anything starts: a sentence, and nothing left running
        if not settings.projection_url:
            find_postgres()
    token = settings.live_token or _made_up_token(settings)
    env = {"TEASPILL_LIVE_TOKEN": token}
    if cluster:
        layout = Layout.derived(settings)
        started = Cluster(settings, layout, env=env).up(print)
        home.write(settings, started.pids(), cluster=layout.to_json())
        return started
    stack = Stack(settings, env=env).up(print)
    _record(settings, stack)
    return stack


def _one_kind(settings: Settings, *, cluster: bool) -> None:
    """A StackError sentence when the home's Restate data is the other layout's: a stack
    started on the wrong one would show none of its agents."""
    nodes = nodes_with_data(settings.home)
    single = settings.home / "restate"
    has_single = single.is_dir() and any(single.iterdir())
    if not cluster and nodes and not has_single:
        raise StackError(
            f"{settings.home} holds a cluster's Restate data ({', '.join(nodes)} in "
            f"{settings.home / 'cluster'}) and no single node's: `teaspill up --cluster` "
            "starts it."
        )
    if cluster and has_single and not nodes:
        raise StackError(
            f"{settings.home} holds a single node's Restate data ({single}) and no "
            "cluster's: `teaspill up` without --cluster starts it; a cluster starts on a "
            "fresh home (TEASPILL_HOME)."
        )


def _made_up_token(settings: Settings) -> str:
    """A live token for this stack, kept where a plane started by hand can read it."""
    token = secrets.token_urlsafe(24)
    path = settings.home / LIVE_TOKEN_FILE
    home.write_private(path, token)
    print(
        f"Live text uses a token made up for this stack, kept in {path}: a plane you start "
        "by hand needs it as TEASPILL_LIVE_TOKEN (or set your own before `teaspill up`)."
    )
    return token


def up(settings: Settings, spec: AgentSpec | None, args: argparse.Namespace) -> int:
    """Start the stack; then chat with `args.agent`, serve until Ctrl-C, or (`--detach`)
    leave it running. A stack this home already runs is used as it is."""
    if (pids := recorded(settings)) is not None:
        return _already_up(settings, spec, args, pids)
    running = start(settings, cluster=getattr(args, "cluster", False))
    if args.detach:
        print(
            f"The stack is up, its gateway at {local_url(settings)}; `teaspill send "
            f"{args.agent} 'hello' --spec {args.spec or 'examples/assistant.toml'}` talks to "
            "it, `teaspill env` prints its addresses for a shell, and `teaspill down` stops it."
        )
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if args.no_chat or not sys.stdin.isatty():
            print("The stack is up. Ctrl-C stops it.")
            signal.pause()
        else:
            _chat(settings, args.agent, spec)
    except KeyboardInterrupt:
        pass
    finally:
        print("Stopping the stack")
        running.down()
        run_file(settings).unlink(missing_ok=True)
    return 0


def _already_up(
    settings: Settings, spec: AgentSpec | None, args: argparse.Namespace, pids: dict[str, int]
) -> int:
    listed = ", ".join(f"{name} {pid}" for name, pid in pids.items())
    print(
        f"The stack of {settings.home} is already running (pids: {listed}); "
        "`teaspill status` shows it and `teaspill down` stops it."
    )
    if args.detach or args.no_chat or not sys.stdin.isatty():
        return 0
    _chat(settings, args.agent, spec)
    return 0


def _chat(settings: Settings, address: str, spec: AgentSpec | None) -> None:
    doors = Doors(settings)
    try:
        talk.open_chat(doors.agent(address), address, spec)
    finally:
        doors.close()


def recorded(settings: Settings) -> dict[str, int] | None:
    """The parts a `teaspill up` of this home started and that still run; a record whose
    processes are all gone is removed."""
    path = run_file(settings)
    if not path.exists():
        return None
    pids = home.pids(home.read(settings))
    alive = {name: pid for name, pid in pids.items() if pid and _signal_group(pid, 0)}
    if not alive:
        path.unlink(missing_ok=True)
        return None
    return alive


def _record(settings: Settings, stack: Stack) -> None:
    pids = {
        "gateway": stack.gateway.pid,
        "restate": stack.restate.pid,
        "endpoint": stack.endpoint.pid,
    }
    home.write(settings, pids)


def down(settings: Settings) -> int:
    """Stop a stack started with `up --detach`: SIGTERM each part, in the order
    `Stack.down` uses."""
    path = run_file(settings)
    if not path.exists():
        raise StackError(
            f"No stack of {settings.home} is running (`teaspill up --detach` records one in "
            f"{path}); nothing to stop."
        )
    # The record lists the parts in the order they are stopped (`Stack.down`,
    # `Cluster.parts`).
    pids = home.pids(home.read(settings))
    for name, pid in pids.items():
        if _signal_group(pid, STOP_SIGNALS.get(name, signal.SIGTERM)):
            print(f"Stopping {name} (pid {pid})")
            _wait_gone(pid)
    release(settings.home)
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
