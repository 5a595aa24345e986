"""Backup and restore on real stacks: a backup taken while agents run (one mid-turn, one
waiting for its child, one waiting on an approval, one with queued messages), restored
into a fresh home on other ports, goes on from the cut; a corrupt or truncated archive is
refused and nothing is written."""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.events import (
    ApprovalRequested,
    ChildSpawned,
    Event,
    ModelMessage,
    ToolFinished,
    TurnEnded,
    TurnParked,
    Waiting,
)
from schemas.spec import AgentSpec, Limits
from schemas.wake import Approval, Message
from services.cli.lifecycle import backup_create, backup_restore
from services.contracts import ADD_KEY
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.lifecycle.backup import BackupError
from services.settings import Settings
from services.stack import Stack
from tests.durable.conftest import eventually, stack_settings
from tests.fixtures.tools import ledger_path

pytestmark = pytest.mark.durable

SPEC = AgentSpec(
    kind="kept",
    instructions="Follow the script.",
    model="script",
    tools={"ledger": "ask", "calculator": "allow"},
    can_spawn=True,
)
SLOW = script({"sleep": 6.0, "reply": "slow done"})
CHILD = script({"sleep": 15.0, "reply": "child done"})
PARENT = script(
    {"calls": [{"name": "spawn_agent", "arguments": {"task": CHILD}}]},
    {"calls": [{"name": "wait"}]},
    {"reply": "parent got: {results}"},
)
ASKER = script(
    {"calls": [{"name": "ledger", "arguments": {"entry": "restored-entry"}}]},
    {"reply": "wrote: {results}"},
)
PARKING = msgspec.structs.replace(SPEC, limits=Limits(approval_timeout=1))
PARKED = script(
    {"calls": [{"name": "ledger", "arguments": {"entry": "parked-entry"}}]},
    {"reply": "wrote: {results}"},
)
CREATED = datetime(2026, 12, 1, tzinfo=UTC)


def events(ingress: Ingress, address: str) -> list[Event]:
    found: list[Event] = []
    while True:
        page = ingress.timeline(address, after_seq=len(found), limit=500)
        found.extend(page.events)
        if not page.events or len(found) >= page.last_seq:
            return found


def has(ingress: Ingress, address: str, kind: type, count: int = 1) -> Callable[[], bool | None]:
    return lambda: sum(isinstance(e.body, kind) for e in events(ingress, address)) >= count or None


def ended(ingress: Ingress, address: str, turn: int) -> TurnEnded:
    def find() -> TurnEnded | None:
        for event in events(ingress, address):
            if event.turn == turn and isinstance(event.body, TurnEnded):
                return event.body
        return None

    return eventually(find, 120, f"turn {turn} of {address} to end")


def running(settings: Settings, address: str) -> Callable[[], bool | None]:
    """The projection shows a turn started (Restate's copy has it once the wake ends)."""

    def probe() -> bool | None:
        rows = httpx.post(
            f"{settings.admin_url}/query",
            json={
                "query": "select count(*) as n from sys_invocation where target_service_name"  # noqa: S608
                f" = 'Agent' and target_service_key = '{address}' and status <> 'completed'"
            },
            headers={"accept": "application/json"},
        ).json()["rows"]
        return rows[0]["n"] >= 1 or None

    return probe


def test_a_backup_taken_mid_run_comes_back_on_other_ports_and_goes_on(tmp_path: Path) -> None:
    first = stack_settings(tmp_path / "first")
    agents = {name: f"test.{name}" for name in ("mid", "parent", "asker", "parked", "queue")}
    archive = tmp_path / "backup.tar.gz"
    with Stack(first) as stack, closing(Ingress(first.ingress_url)) as ingress:
        for name in ("asker", "queue", "parent"):
            ingress.message(agents[name], "hello", SPEC)
        ingress.message(agents["parked"], "hello", PARKING)
        plaintext, key = new_key("test", "admin", CREATED)
        ingress.call(ADD_KEY, key, "test")
        ingress.send_wake(agents["parent"], Message(PARENT))
        ingress.send_wake(agents["asker"], Message(ASKER))
        ingress.send_wake(agents["parked"], Message(PARKED))
        eventually(has(ingress, agents["asker"], ApprovalRequested), 60, "the approval request")
        eventually(has(ingress, agents["parked"], TurnParked), 60, "the turn to park")
        eventually(has(ingress, agents["parent"], Waiting), 60, "the parent to wait")
        ingress.send_wake(agents["mid"], Message(SLOW, spec=SPEC))
        ingress.send_wake(agents["queue"], Message(SLOW))
        eventually(running(first, agents["queue"]), 10, "the slow turn to run")
        for text in ("second", "third"):
            ingress.send_wake(agents["queue"], Message(text))
        eventually(running(first, agents["mid"]), 60, "the mid-turn agent to run")
        before = {name: events(ingress, address) for name, address in agents.items()}

        backup_create(first, archive)

        assert stack.restate.running
        # The cut fell while these ran: each was in flight before the backup and after it.
        for name in ("mid", "queue"):
            assert running(first, agents[name])(), name
        child = f"{agents['parent']}.t2r1c0"
        assert running(first, child)(), "the child still runs"
        assert not any(isinstance(e.body, TurnEnded) and e.turn == 2 for e in before["asker"])

    second = stack_settings(tmp_path / "second")
    ports = {second.ingress_port, second.admin_port, second.endpoint_port}
    assert ports.isdisjoint({first.ingress_port, first.admin_port, first.endpoint_port})
    backup_restore(second, archive)
    with Stack(second), closing(Ingress(second.ingress_url)) as ingress:
        for name, address in agents.items():
            assert events(ingress, address)[: len(before[name])] == before[name], name
        assert ended(ingress, agents["mid"], 1).reply == "slow done"
        assert "child done" in ended(ingress, agents["parent"], 2).reply
        for name in ("asker", "parked"):
            timeline = events(ingress, agents[name])
            asked = next(e.body for e in timeline if isinstance(e.body, ApprovalRequested))
            ingress.send_wake(agents[name], Approval(asked.request_id, approve=True, by="ops"))
            assert ended(ingress, agents[name], 2).outcome == "succeeded", name
        assert [ended(ingress, agents["queue"], turn).outcome for turn in (2, 3, 4)] == [
            "succeeded"
        ] * 3
        lines = ledger_path(second.home).read_text().splitlines()
        entries = Counter(line.split("\t")[1] for line in lines)
        assert entries == Counter({"restored-entry": 1, "parked-entry": 1}), "each ran once"
        finished = [e for e in events(ingress, agents["asker"]) if isinstance(e.body, ToolFinished)]
        assert len(finished) == 1
        gateway = f"http://127.0.0.1:{second.gateway_port}"
        auth = {"Authorization": f"Bearer {plaintext}"}
        assert httpx.get(f"{gateway}/v1/me", headers=auth).status_code == 200
        row = httpx.get(f"{gateway}/v1/agents/{agents['queue']}", headers=auth)
        assert row.status_code == 200
        assert row.json()["turn"] >= 3
        spawned = [e.body for e in before["parent"] if isinstance(e.body, ChildSpawned)]
        assert any(isinstance(e.body, ModelMessage) for e in events(ingress, spawned[0].child))
        assert not (second.home / "restored.json").exists()

    with pytest.raises(BackupError) as twice:
        backup_restore(second, archive)
    assert "holds an installation already" in str(twice.value)


def test_a_corrupt_or_truncated_backup_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    settings = stack_settings(tmp_path / "home")
    archive = tmp_path / "backup.tar.gz"
    with (
        Stack(settings, gateway=False) as stack,
        closing(Ingress(settings.ingress_url)) as ingress,
    ):
        ingress.message("test.saved", "hello", SPEC)
        backup_create(settings, archive)
        assert stack.restate.running
    whole = archive.read_bytes()
    raw = bytearray(gzip.decompress(whole))
    raw[len(raw) // 2] ^= 0xFF
    damaged = {
        "truncated": whole[: len(whole) // 2],
        "flipped": gzip.compress(bytes(raw)),
        "foreign": gzip.compress(b"not a tar at all" * 100),
    }
    for name, content in damaged.items():
        bad = tmp_path / f"{name}.tar.gz"
        bad.write_bytes(content)
        target = stack_settings(tmp_path / f"restored-{name}")
        with pytest.raises(BackupError) as refused:
            backup_restore(target, bad)
        assert "nothing was written" in str(refused.value), name
        assert not target.home.exists() or not any(target.home.iterdir()), name
