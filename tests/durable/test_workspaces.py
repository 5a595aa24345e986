"""Workspaces on a real stack (restate-server, the endpoint, the gateway) with real bwrap:
a turn's files and commands, escapes, crashes, stops, and a missing sandbox."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec
import psutil
import pytest

from schemas.events import ArtifactWritten, Event, ToolFinished, TurnEnded
from schemas.sandbox import CommandLimits, WorkspaceSettings
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message
from services.contracts import ADD_KEY
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.stack import Stack, isolated_settings
from services.workspace.files import workspace_uid
from tests.durable.conftest import eventually

pytestmark = pytest.mark.durable

TOOLS = ("run_command", "read_file", "write_file", "list_files")
LIMITS = CommandLimits(
    wall_seconds=3, cpu_seconds=2, memory_mb=128, processes=32, output_bytes=1_000_000
)
SPEC = AgentSpec(
    kind="worker",
    instructions="Follow the script.",
    model="script",
    tools=TOOLS,
    limits=Limits(max_rounds=20),
    workspace=WorkspaceSettings(quota_mb=16, limits=LIMITS),
)


class Live:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.ingress = Ingress(stack.settings.ingress_url)

    @property
    def home(self) -> Path:
        return self.stack.settings.home

    def events(self, address: str) -> list[Event]:
        return list(self.ingress.timeline(address, 0, 500).events)

    def turn_end(self, address: str, timeout: float = 120) -> TurnEnded:
        def ended() -> TurnEnded | None:
            found = [e.body for e in self.events(address) if isinstance(e.body, TurnEnded)]
            return found[0] if found else None

        return eventually(ended, timeout, f"the turn of {address} to end")

    def results(self, address: str) -> list[ToolFinished]:
        return [e.body for e in self.events(address) if isinstance(e.body, ToolFinished)]

    def workspace(self, address: str) -> Path:
        return self.home / "workspaces" / address.split(".", maxsplit=1)[0] / address


@contextlib.contextmanager
def start(settings_home: Path, **overrides: object) -> Iterator[Live]:
    stack = Stack(isolated_settings(settings_home, **overrides))
    stack.up()
    live = Live(stack)
    try:
        yield live
    finally:
        live.ingress.close()
        stack.down()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with start(tmp_path_factory.mktemp("home")) as started:
        yield started


def calls(*lines: tuple[str, Mapping[str, object]]) -> str:
    steps = [{"calls": [{"name": name, "arguments": arguments}]} for name, arguments in lines]
    return script(*steps, {"reply": "{results}"})


def sandboxed(uid: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["uids"]):
        if process.info["uids"] and process.info["uids"].real == uid:
            found.append(process)
    return found


def gateway_key(live: Live, tenant: str) -> str:
    plaintext, key = new_key(tenant, "admin", datetime(2026, 1, 1, tzinfo=UTC))
    live.ingress.call(ADD_KEY, key, tenant)
    return plaintext


def test_a_turn_writes_runs_and_reads_and_the_gateway_serves_the_artifact(live: Live) -> None:
    address = "acme.writer"
    text = calls(
        ("write_file", {"path": "data/numbers.txt", "content": "3\n1\n2\n"}),
        ("run_command", {"command": "sort -n data/numbers.txt > sorted.txt && cat sorted.txt"}),
        ("read_file", {"path": "sorted.txt"}),
        ("list_files", {}),
    )
    live.ingress.send_wake(address, Message(text, spec=SPEC))
    ended = live.turn_end(address)

    assert ended.outcome == "succeeded"
    written, ran, read, listed = live.results(address)
    assert written.status == ran.status == read.status == listed.status == "ok"
    assert "Exit status 0" in ran.content
    assert read.content == "1\n2\n3\n"
    assert listed.content.splitlines() == ["data/numbers.txt\t6", "sorted.txt\t6"]
    artifacts = [e.body for e in live.events(address) if isinstance(e.body, ArtifactWritten)]
    assert [(a.path, a.size) for a in artifacts] == [("data/numbers.txt", 6), ("sorted.txt", 6)]
    wanted = hashlib.sha256(b"1\n2\n3\n").hexdigest()
    assert artifacts[1].sha256 == wanted

    key = gateway_key(live, "acme")
    url = f"{live.stack.gateway.url}/v1/agents/{address}/artifacts/{wanted}"
    headers = {"authorization": f"Bearer {key}"}
    served = eventually(
        lambda: ((r := httpx.get(url, headers=headers)).status_code == 200 and r) or None,
        30,
        "the gateway to serve the artifact",
    )
    assert hashlib.sha256(served.content).hexdigest() == wanted
    other_url = url.replace("acme.writer", "acme.nobody")
    assert httpx.get(other_url, headers=headers).status_code == 404
    other_tenant = {"authorization": f"Bearer {gateway_key(live, 'zeta')}"}
    me = f"{live.stack.gateway.url}/v1/me"
    eventually(
        lambda: httpx.get(me, headers=other_tenant).status_code == 200 or None,
        30,
        "the other tenant's key to reach the projection",
    )
    assert httpx.get(url, headers=other_tenant).status_code == 404


ESCAPES: list[tuple[str, str]] = [
    ("cat /proc/1/environ; ls -d /work /root /home 2>&1; cat ../secret.txt", ""),
    ("cat <other>/private.txt", "No such file"),
    ("cat <home>/secret.txt", "No such file"),
    ("echo pwned > <home>/secret.txt", "cannot create"),
    ("echo pwned > /usr/pwned.txt", "Read-only file system"),
    ("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", <gateway>))'", "refused"),
    ("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", <ingress>))'", "refused"),
    ("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", <admin>))'", "refused"),
    ("f(){ f|f& };f; sleep 2", "processes limit"),
    ("yes | head -c 1000000000", "output limit"),
    ("sleep 60", "wall time limit"),
    ("python3 -c 'x = [b\"x\" * (2**20 + i) for i in range(400)]'", "memory limit"),
]


def fill(command: str, places: Mapping[str, object]) -> str:
    for name, value in places.items():
        command = command.replace(f"<{name}>", str(value))
    return command


def test_escape_attempts_fail_and_change_nothing_outside(live: Live) -> None:
    other = "acme.victim"
    live.workspace(other).mkdir(parents=True)
    (live.workspace(other) / "private.txt").write_text("the victim's notes")
    (live.home / "secret.txt").write_text("the home's secret")
    s = live.stack.settings
    places = {
        "other": live.workspace(other),
        "home": live.home,
        "gateway": s.gateway_port,
        "ingress": s.ingress_port,
        "admin": s.admin_port,
    }
    address = "acme.intruder"
    commands = [(fill(c, places), expected) for c, expected in ESCAPES]
    text = calls(*[("run_command", {"command": command}) for command, _ in commands])
    live.ingress.send_wake(address, Message(text, spec=SPEC))
    ended = live.turn_end(address, timeout=240)

    assert ended.outcome == "succeeded"
    results = live.results(address)
    assert len(results) == len(commands)
    first = results[0].content
    assert "TEASPILL" not in first
    assert "the home's secret" not in first
    assert first.count("No such file") >= 3
    for (command, expected), finished in zip(commands[1:], results[1:], strict=True):
        assert expected in finished.content, (command, finished.content)
    assert (live.workspace(other) / "private.txt").read_text() == "the victim's notes"
    assert (live.home / "secret.txt").read_text() == "the home's secret"
    assert not Path("/usr/pwned.txt").exists()
    assert sandboxed(workspace_uid(address)) == []


def test_sigkill_of_the_endpoint_mid_command_runs_it_once_and_says_unknown(live: Live) -> None:
    address = "acme.crashed"
    text = calls(
        ("run_command", {"command": "echo ran >> ledger.txt; sleep 2.5"}),
        ("run_command", {"command": "cat ledger.txt"}),
    )
    live.ingress.send_wake(address, Message(text, spec=SPEC))
    ledger = live.workspace(address) / "ledger.txt"
    eventually(lambda: ledger.exists() or None, 60, "the command to start")
    live.stack.endpoint.kill()
    live.stack.endpoint.start()
    ended = live.turn_end(address)

    assert ended.outcome == "succeeded"
    assert ledger.read_text() == "ran\n", "the command ran once"
    first, second = live.results(address)
    assert first.status == "unknown"
    assert "may or may not have taken effect" in first.content
    assert second.status == "ok"
    assert "may or may not have taken effect" in ended.reply
    assert sandboxed(workspace_uid(address)) == []


def test_stop_during_a_long_command_ends_the_turn_and_its_processes(live: Live) -> None:
    address = "acme.stopped"
    slow = msgspec.structs.replace(LIMITS, wall_seconds=300)
    spec = msgspec.structs.replace(SPEC, workspace=WorkspaceSettings(limits=slow))
    text = calls(("run_command", {"command": "sleep 200 & sleep 200 & sleep 200"}))
    live.ingress.send_wake(address, Message(text, spec=spec))
    uid = workspace_uid(address)
    eventually(lambda: len(sandboxed(uid)) >= 3 or None, 60, "the command to start")
    stopped_at = time.monotonic()
    assert live.ingress.stop(address).stopping
    ended = live.turn_end(address, timeout=10)
    took = time.monotonic() - stopped_at

    assert ended.outcome == "stopped"
    assert took < 3, f"the turn took {took:.1f} s to stop"
    eventually(lambda: sandboxed(uid) == [] or None, 3, "the command's processes to go")


def test_without_bwrap_commands_are_refused_and_the_turn_goes_on(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with start(tmp_path_factory.mktemp("nobwrap"), bwrap="/nonexistent/bwrap") as live:
        address = "acme.unsandboxed"
        text = calls(
            ("run_command", {"command": "echo ran > ran.txt"}),
            ("write_file", {"path": "note.txt", "content": "still works"}),
        )
        live.ingress.send_wake(address, Message(text, spec=SPEC))
        ended = live.turn_end(address)

        assert ended.outcome == "succeeded"
        refused, written = live.results(address)
        assert refused.status == "error"
        assert "the sandbox program bwrap was not found at '/nonexistent/bwrap'" in refused.content
        assert "never run outside the sandbox" in refused.content
        assert not (live.workspace(address) / "ran.txt").exists()
        assert written.status == "ok"


def test_a_child_has_its_own_workspace_and_reads_a_lent_one(live: Live) -> None:
    parent = "acme.lender"
    lending = msgspec.structs.replace(
        SPEC,
        can_spawn=True,
        workspace=msgspec.structs.replace(SPEC.workspace, lend_to_children=True),
    )
    child_script = calls(
        ("run_command", {"command": "cat /parent/plan.txt; echo mine > own.txt"}),
        ("run_command", {"command": "echo changed > /parent/plan.txt"}),
    )
    text = script(
        {"calls": [{"name": "write_file", "arguments": {"path": "plan.txt", "content": "P"}}]},
        {"calls": [{"name": "spawn_agent", "arguments": {"task": child_script}}]},
        {"calls": [{"name": "wait"}]},
        {"reply": "{results}"},
    )
    live.ingress.send_wake(parent, Message(text, spec=lending))
    ended = live.turn_end(parent)

    assert ended.outcome == "succeeded"
    child = f"{parent}.t1r2c0"
    read, changed = live.results(child)
    assert read.content.endswith("--- output ---\nP")
    assert "Read-only file system" in changed.content
    assert (live.workspace(parent) / "plan.txt").read_text() == "P"
    assert (live.workspace(child) / "own.txt").read_text() == "mine\n"
    assert not (live.workspace(parent) / "own.txt").exists()


FILL_TMP = "i=0; while head -c 4000000 /dev/zero > /tmp/f$i; do i=$((i+1)); done; du -sk /tmp"


def test_commands_past_the_kernel_limits_are_stopped_and_another_agents_turn_goes_on(
    live: Live,
) -> None:
    address, other = "acme.hog", "acme.bystander"
    spec = msgspec.structs.replace(
        SPEC,
        workspace=WorkspaceSettings(
            quota_mb=16, limits=msgspec.structs.replace(LIMITS, wall_seconds=20)
        ),
    )
    text = calls(
        ("run_command", {"command": "f(){ f|f& };f; sleep 15"}),
        # Under the address-space rlimit (512 MB), over the memory cgroup's 128 MB.
        ("run_command", {"command": "python3 -c 'b = bytearray(400 * 2**20)'; sleep 15"}),
        ("run_command", {"command": FILL_TMP}),
        ("run_command", {"command": "head -c 200000000 /dev/zero > big"}),
    )
    started = time.monotonic()
    live.ingress.send_wake(address, Message(text, spec=spec))
    live.ingress.send_wake(
        other, Message(calls(("run_command", {"command": "echo here"})), spec=spec)
    )
    assert live.turn_end(other).outcome == "succeeded"
    bystander = time.monotonic() - started
    live.turn_end(address)
    results = [r.content for r in live.results(address)]
    assert "passed its processes limit (32 processes)" in results[0]
    assert "passed its memory limit (128 MB)" in results[1]
    assert "/tmp and /dev/shm hold 64 MB each" in results[2]
    assert int(results[2].strip().splitlines()[-1].split()[0]) <= 64 * 1024
    assert "its quota of 16 MB (workspace.quota_mb)" in results[3]
    for content in results[:2]:
        assert float(content.split(" after ")[1].split(" s")[0]) < 10  # not the sleep's end
    assert "here" in live.results(other)[0].content
    assert bystander < 15
