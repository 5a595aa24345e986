"""The `teaspill` CLI against a running stack, through its own entry point."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas.events import ApprovalRequested
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.cli.main import main
from services.executor.scripted import script
from services.projection.store import AgentRow, ProjectionStore
from services.stack import Gateway, settings_env
from tests.durable.conftest import LiveStack, eventually

pytestmark = pytest.mark.durable

SPEC_FILE = """
kind = "clerk"
instructions = "Follow the script."
model = "script"
[tools]
calculator = "allow"
ledger = "ask"
"""


@pytest.fixture(scope="module")
def gateway(stack: LiveStack) -> Iterator[Gateway]:
    """The CLI reaches agents through the gateway."""
    part = Gateway(stack.settings)
    part.start()
    yield part
    part.stop()


@pytest.fixture
def cli(stack: LiveStack, gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in settings_env(stack.settings).items():
        monkeypatch.setenv(name, value)

    def run(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        code = main(list(argv))
        return code, capsys.readouterr().out

    return run


def test_keys_are_created_listed_and_revoked(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = cli("keys", "create", "clitenant", "--scope", "write", capsys=capsys)
    assert code == 0
    plaintext = out.strip().splitlines()[-1]
    key_id = re.match(r"tsk_([a-z0-9]{12})_", plaintext)
    assert key_id is not None
    _, listed = cli("keys", "list", "clitenant", capsys=capsys)
    assert listed.splitlines()[0].split() == ["ID", "NAME", "SCOPE", "CREATED", "STATE"]
    assert re.search(rf"^{key_id.group(1)}  -\s+write ", listed, re.M), listed
    assert "active" in listed
    assert plaintext not in listed
    code, revoked = cli("keys", "revoke", "clitenant", key_id.group(1), capsys=capsys)
    assert code == 0
    assert "revoked" in revoked


def test_specs_publish_send_by_kind_approve_tail_and_list(
    cli: Any, stack: LiveStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "clerk.toml"
    spec.write_text(SPEC_FILE)
    assert cli("specs", "publish", "clitenant", str(spec), capsys=capsys) == (
        0,
        "Published clerk version 1 for clitenant.\n",
    )
    _, listed = cli("specs", "list", "clitenant", capsys=capsys)
    assert listed.splitlines()[0].split() == ["KIND", "VERSION", "MODEL", "PUBLISHED"]
    assert listed.splitlines()[1].split()[:3] == ["clerk", "1", "script"]

    address = "clitenant.desk"
    stack.ingress.wake(address, _message_by_kind("clerk", _ledger_script()))
    request = eventually(lambda: _request_id(stack, address), 30, "an approval request")
    code, out = cli("approve", address, request, capsys=capsys)
    assert code == 0
    assert out.startswith(f"Accepted: Restate holds your approval of {request}.")

    def finished() -> str | None:
        _, tail = cli("tail", address, capsys=capsys)
        return tail if "turn 1 succeeded" in tail else None

    tail = eventually(finished, 30, "the approved turn to finish")
    assert f"asks approval {request} for ledger" in tail
    assert re.search(rf"{request} approved by cli \([a-z0-9]{{12}}\)", tail), "the CLI's key"
    assert "turn 1 succeeded" in tail
    eventually(lambda: _in_catalog(stack, address), 30, "the projector to catch up")
    _, agents = cli("agents", "list", "clitenant", capsys=capsys)
    header, row = agents.splitlines()[:2]
    assert header.split() == ["ADDRESS", "KIND", "STATUS", "TURN", "SEQ", "LAST", "ACTIVITY"]
    assert row.split()[:3] == [address, "clerk", "idle"]
    assert header.index("STATUS") == row.index("idle"), "the columns line up"


def test_a_named_key_is_listed_by_its_name(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = cli("keys", "create", "named", "--scope", "write", "--name", "alice", capsys=capsys)
    assert code == 0
    assert "(alice)" in out.splitlines()[0]
    _, listed = cli("keys", "list", "named", capsys=capsys)
    assert re.search(r"^[a-z0-9]{12}  alice\s+write ", listed, re.M), listed


def test_send_follow_prints_the_turn_live_and_stop_on_an_idle_agent_says_so(
    cli: Any, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "clerk.toml"
    spec.write_text(SPEC_FILE)
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "3*3"}}]},
        {"reply": "it is {results}"},
    )
    code, out = cli("send", address, text, "--spec", str(spec), "--follow", capsys=capsys)
    assert code == 0
    lines = out.splitlines()
    assert "calculator → ok: 9" in lines[3]
    assert "turn 1 succeeded" in lines[-2]
    assert lines[-1] == "it is 9"
    code, out = cli("stop", address, capsys=capsys)
    assert code == 0
    assert out.startswith("Accepted: Restate holds your stop.")

    def refused() -> str | None:
        _, tail = cli("tail", address, capsys=capsys)
        return tail if "a stop was refused" in tail else None

    assert "nothing to stop" in eventually(refused, 30, "the stop's outcome")


def test_projections_rebuild_restores_identical_content(
    cli: Any, stack: LiveStack, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.ingress.message(address, "one", _adhoc())
    stack.ingress.message(address, "two")
    path = stack.home / "projection.db"
    eventually(lambda: _caught_up(stack, address), 30, "the projector to catch up")
    before = asyncio.run(_dump(path))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)

    code, out = cli("projections", "rebuild", capsys=capsys)
    assert code == 0
    assert "Rebuilt:" in out
    assert asyncio.run(_dump(path)) == before


def _adhoc() -> AgentSpec:
    return AgentSpec("adhoc", "x", model="script")


def _message_by_kind(kind: str, text: str) -> Message:
    return Message(text, kind=kind)


def _ledger_script() -> str:
    return script(
        {"calls": [{"name": "ledger", "arguments": {"entry": "from-cli"}}]},
        {"reply": "wrote: {results}"},
    )


def _request_id(stack: LiveStack, address: str) -> str | None:
    found = [e.body for e in stack.events(address) if isinstance(e.body, ApprovalRequested)]
    return found[0].request_id if found else None


def _in_catalog(stack: LiveStack, address: str) -> bool | None:
    return _catalog_shows(stack, address, lambda row: row.status == "idle")


def _caught_up(stack: LiveStack, address: str) -> bool | None:
    want = stack.ingress.status(address).last_seq
    return _catalog_shows(stack, address, lambda row: row.last_seq == want)


def _catalog_shows(
    stack: LiveStack, address: str, check: Callable[[AgentRow], bool]
) -> bool | None:
    """Whether the projection's catalog row of `address` passes `check` (None if not)."""

    async def read() -> bool:
        async with await ProjectionStore.open(stack.home / "projection.db") as store:
            row = await store.agent(address)
            return row is not None and check(row)

    return asyncio.run(read()) or None


async def _dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    async with await ProjectionStore.open(path, readonly=True) as store:
        return await store.dump()


def test_send_by_kind_and_a_chat_that_keeps_the_agents_spec(
    cli: Any,
    address: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = tmp_path / "clerk.toml"
    spec.write_text(SPEC_FILE)
    tenant = address.partition(".")[0]
    assert cli("specs", "publish", tenant, str(spec), capsys=capsys)[0] == 0
    code, out = cli(
        "send", address, script({"reply": "sent by kind"}), "--kind", "clerk", capsys=capsys
    )
    assert (code, out.strip().splitlines()[-1]) == (0, "sent by kind")

    # Without --spec a chat keeps the agent's spec: the scripted model still answers (the
    # example spec would have switched it to smollm2).
    monkeypatch.setattr("sys.stdin", io.StringIO(script({"reply": "still a clerk"}) + "\n"))
    code, out = cli("chat", address, capsys=capsys)
    assert code == 0
    assert f"Talking to {address} (its current spec)" in out
    assert "still a clerk" in out.splitlines()[-2]
