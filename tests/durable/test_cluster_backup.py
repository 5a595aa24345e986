"""Backup and restore of a cluster home (`teaspill up --cluster`): the three nodes are
frozen together while agents run, the archive brought back into a fresh home on other
ingress, admin, endpoint and gateway ports goes on from the cut with no side effect twice,
and a start that would move the nodes' own ports, or start the home as a single node, is
refused with a sentence."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from schemas.events import ApprovalRequested, ToolFinished
from schemas.wake import Approval, Message
from services.cli.lifecycle import backup_create, backup_restore
from services.contracts import ADD_KEY
from services.ingress import Ingress
from services.keys import new_key
from services.lifecycle.backup import BackupError
from services.stack import StackError, settings_env
from services.stack.cluster import Cluster
from tests.durable.conftest import eventually, stack_settings
from tests.durable.test_backup import ASKER, CREATED, SLOW, SPEC, ended, events, has, running
from tests.fixtures.tools import ledger_path

pytestmark = pytest.mark.durable


def test_a_cluster_backup_taken_mid_run_comes_back_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = stack_settings(tmp_path / "first")
    agents = {name: f"test.{name}" for name in ("mid", "asker", "queue")}
    archive = tmp_path / "cluster.tar.gz"
    with Cluster(first, gateways=False), closing(Ingress(first.ingress_url)) as ingress:
        for address in agents.values():
            ingress.message(address, "hello", SPEC)
        plaintext, key = new_key("test", "admin", CREATED)
        ingress.call(ADD_KEY, key, "test")
        ingress.send_wake(agents["asker"], Message(ASKER))
        eventually(has(ingress, agents["asker"], ApprovalRequested), 60, "the approval request")
        ingress.send_wake(agents["mid"], Message(SLOW))
        ingress.send_wake(agents["queue"], Message(SLOW))
        ingress.send_wake(agents["queue"], Message("second"))
        eventually(running(first, agents["mid"]), 60, "the mid-turn agent to run")
        eventually(running(first, agents["queue"]), 60, "the queue's slow turn to run")
        before = {name: events(ingress, address) for name, address in agents.items()}

        backup_create(first, archive)

        assert "(3 restate-server nodes paused" in capsys.readouterr().out
        # Thawed: the turn cut by the backup ends on the cluster it was taken from.
        assert running(first, agents["mid"])(), "the cut fell mid-turn"
        assert ended(ingress, agents["mid"], 2).reply == "slow done"

    second = stack_settings(tmp_path / "second").model_copy(update={"node_port": first.node_port})
    moved = {second.ingress_port, second.admin_port, second.endpoint_port, second.gateway_port}
    assert moved.isdisjoint({first.ingress_port, first.admin_port, first.endpoint_port})
    backup_restore(second, archive)
    assert "`teaspill up --cluster` starts it" in capsys.readouterr().out
    with Cluster(second), closing(Ingress(second.ingress_url)) as ingress:
        for name, address in agents.items():
            assert events(ingress, address)[: len(before[name])] == before[name], name
        assert ended(ingress, agents["mid"], 2).reply == "slow done"
        assert [ended(ingress, agents["queue"], turn).outcome for turn in (2, 3)] == [
            "succeeded"
        ] * 2
        timeline = events(ingress, agents["asker"])
        asked = next(e.body for e in timeline if isinstance(e.body, ApprovalRequested))
        ingress.send_wake(agents["asker"], Approval(asked.request_id, approve=True, by="ops"))
        assert ended(ingress, agents["asker"], 2).outcome == "succeeded"
        lines = ledger_path(second.home).read_text().splitlines()
        assert Counter(line.split("\t")[1] for line in lines) == Counter({"restored-entry": 1})
        finished = [e for e in events(ingress, agents["asker"]) if isinstance(e.body, ToolFinished)]
        assert len(finished) == 1
        gateway = f"http://127.0.0.1:{second.gateway_port}"
        auth = {"Authorization": f"Bearer {plaintext}"}
        row = httpx.get(f"{gateway}/v1/agents/{agents['queue']}", headers=auth, timeout=30)
        assert row.status_code == 200, row.text
        assert row.json()["turn"] >= 3, "the projection was rebuilt from the restored nodes"
        assert not (second.home / "restored.json").exists()

    with pytest.raises(BackupError) as twice:
        backup_restore(second, archive)
    assert "its cluster folder is not empty" in str(twice.value)

    third = stack_settings(tmp_path / "third")
    assert third.node_port != first.node_port
    backup_restore(third, archive)
    with pytest.raises(StackError) as elsewhere:
        Cluster(third).up()
    assert f"Set TEASPILL_NODE_PORT={first.node_port}" in str(elsewhere.value)
    assert not (third.home / "logs" / "restate-n1.log").exists(), "nothing was started"
    single = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "up", "--detach"],
        env={**os.environ, **settings_env(third)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert single.returncode == 1, single.stdout
    assert "holds a cluster's Restate data" in single.stderr
    assert "`teaspill up --cluster` starts it" in single.stderr
    assert not (third.home / "stack.json").exists(), "nothing was started"
