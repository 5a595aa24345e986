"""A sandbox with network never reaches the stack: the operator grants the network per
tenant, and a granted tenant's commands see none of the host's loopback ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.events import ToolFinished
from schemas.wake import Message
from services.contracts import KEYS, Empty
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.stack import Stack, isolated_settings, settings_env
from tests.durable.conftest import eventually
from tests.gateway.test_stack import made_key

pytestmark = pytest.mark.durable

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
NET_SPEC = {
    "kind": "net",
    "instructions": "Run what you are told.",
    "model": "script",
    "tools": ["run_command"],
    "workspace": {"network": True},
}
PROBE = """
import json, socket, urllib.request
found = {}
for host in ("127.0.0.1", "10.0.2.2", "::1"):
    for port in PORTS:
        try:
            socket.create_connection((host, port), 3).close()
            found[f"{host}:{port}"] = "open"
        except OSError as error:
            found[f"{host}:{port}"] = error.strerror or "failed"
key = json.dumps(KEY).encode()
try:
    urllib.request.urlopen(urllib.request.Request(
        INGRESS + "/Tenant/acme/add_key", key, {"content-type": "application/json"}), timeout=3)
    found["add_key"] = "added"
except OSError as error:
    found["add_key"] = str(error)
print("PROBE " + json.dumps(found))
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("network-home")
    settings = isolated_settings(home, network_tenants=("evil",))
    with Stack(settings) as running:
        yield running


def admin_key(stack: Stack, tenant: str) -> str:
    with httpx.Client(base_url=stack.gateway.url) as http:
        return made_key(stack.settings, http, tenant, "admin")


def publish(stack: Stack, key: str) -> httpx.Response:
    return httpx.post(
        f"{stack.gateway.url}/v1/specs",
        json=NET_SPEC,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_a_tenant_without_the_grant_cannot_publish_a_spec_with_network(
    stack: Stack, tmp_path: Path
) -> None:
    refused = publish(stack, admin_key(stack, "acme"))
    assert refused.status_code == 422, refused.text
    said = refused.json()["error"]["message"]
    assert "the operator has not granted the network to tenant 'acme'" in said
    spec_file = tmp_path / "net.json"
    spec_file.write_text(json.dumps(NET_SPEC))
    cli = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "specs", "publish", "acme", str(spec_file)],
        capture_output=True,
        text=True,
        env={**os.environ, **settings_env(stack.settings), "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert cli.returncode != 0
    assert "the operator has not granted the network to tenant 'acme'" in cli.stderr
    assert "Traceback" not in cli.stderr


def test_a_granted_sandbox_reaches_none_of_the_stacks_ports_and_mints_no_key(
    stack: Stack,
) -> None:
    assert publish(stack, admin_key(stack, "evil")).status_code == 201
    s = stack.settings
    ports = [s.ingress_port, s.admin_port, s.gateway_port, s.endpoint_port, s.node_port]
    _, key = new_key("acme", "admin", CREATED)
    probe = (
        PROBE.replace("PORTS", repr(ports))
        .replace("KEY", repr(msgspec.to_builtins(key)))
        .replace("INGRESS", repr(s.ingress_url))
    )
    command = f"python3 - <<'EOF'\n{probe}\nEOF"
    text = script(
        {"calls": [{"name": "run_command", "arguments": {"command": command}}]},
        {"reply": "done"},
    )
    address = "evil.probe"
    ingress = Ingress(s.ingress_url)
    try:
        ingress.send_wake(address, Message(text, kind="net"))

        def finished() -> ToolFinished | None:
            for event in ingress.timeline(address, after_seq=0, limit=100).events:
                if isinstance(event.body, ToolFinished):
                    return event.body
            return None

        result = eventually(finished, 120, "the probe to finish")
        keys = ingress.call(KEYS, Empty(), "acme")
    finally:
        ingress.close()
    line = next(line for line in result.content.splitlines() if line.startswith("PROBE "))
    found = json.loads(line.removeprefix("PROBE "))
    assert len(found) == 3 * len(ports) + 1
    assert "open" not in found.values(), found
    assert "added" not in found.values()
    assert key.id not in {k.id for k in keys.keys}
