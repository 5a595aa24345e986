"""The effect ledger lives in Restate: an endpoint restarted on a fresh home directory,
and a second replica of it, see the entries the first one left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.chat import ToolCall
from schemas.events import ToolFinished, WakeResult
from schemas.wake import Message, WakeEnvelope
from services.contracts import AGENT, WAKE
from services.effects.ledger import RestateLedger
from services.stack.endpoint import Endpoint
from services.stack.identity import public_key
from services.stack.journal import RestateAdmin
from services.tools.registry import load_tools
from tests.durable.conftest import LiveStack, eventually, live_stack, stack_settings
from tests.durable.test_crash import SPEC, ledger_calls, lines_for, read
from tests.fixtures.tools import ledger_path, started_path

pytestmark = pytest.mark.durable


def wake(stack: LiveStack, address: str, message: Message) -> tuple[str, WakeResult]:
    """The wake's invocation id, and its result."""
    answer = httpx.post(
        f"{stack.settings.ingress_url}{WAKE.path(address)}",
        content=msgspec.json.encode(WakeEnvelope(message)),
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["x-restate-id"], msgspec.json.decode(answer.content, type=WakeResult)


def attach(stack: LiveStack, invocation: str) -> WakeResult:
    """Wait for an invocation's result."""
    answer = httpx.get(
        f"{stack.settings.ingress_url}/restate/invocation/{invocation}/attach", timeout=60.0
    )
    assert answer.status_code == 200, answer.text
    return msgspec.json.decode(answer.content, type=WakeResult)


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    """A stack of this module's own: its endpoint moves to another home directory."""
    with live_stack(stack_settings(tmp_path_factory.mktemp("home"))) as live:
        first = live.endpoint
        yield live
        if live.endpoint is not first:  # the stack stops the endpoint it started
            live.endpoint.stop()


def test_a_call_interrupted_mid_way_is_unknown_after_a_restart_on_a_fresh_home(
    own: LiveStack, tmp_path: Path
) -> None:
    address = "acme.effects.fresh"
    first_home = own.home
    own.ingress.send_wake(address, Message(ledger_calls(("during", 30)), spec=SPEC))
    eventually(
        lambda: "during" in lines_for(read(started_path(first_home)), address) or None,
        60,
        "the slow ledger step to start",
    )
    own.endpoint.kill()
    # A replica on another disk is told restate-server's public key, as an operator would.
    keys = (public_key(first_home),)
    fresh = own.settings.model_copy(update={"home": tmp_path / "fresh", "identity_keys": keys})
    own.endpoint = Endpoint(fresh)
    own.endpoint.start()

    ended = own.wait_for_turn_end(address, 1)
    finished = [e.body.status for e in own.events(address) if isinstance(e.body, ToolFinished)]
    assert finished == ["unknown"]
    assert "may or may not have taken effect" in ended.reply
    for home in (first_home, fresh.home):
        assert lines_for(read(ledger_path(home)), address) == [], "the call never finished"
    assert lines_for(read(started_path(fresh.home)), address) == [], "nor was it run again"


def test_a_call_retried_on_a_second_replica_after_it_finished_returns_its_result(
    own: LiveStack, tmp_path: Path
) -> None:
    """Two replicas of the tool plane, each with a home of its own, behind one Restate:
    the second attempt of one call (the same idempotency key) gets the first one's
    result, and the tool ran once."""
    address = "acme.effects.replicas"
    key = f"{address}/1/1/call_0"
    call = ToolCall("call_0", "ledger", {"entry": "once"})
    homes = (tmp_path / "one", tmp_path / "two")
    results = []
    for home in homes:
        home.mkdir()
        ledger = RestateLedger(own.settings.ingress_url)
        try:
            tools = load_tools(home, ("tests.fixtures.tools",), ledger)
            results.append(tools.run(call, key, address))
        finally:
            ledger.close()

    first, second = results
    assert (first.status, first.content) == ("ok", "recorded once")
    assert (second.status, second.content) == (first.status, first.content)
    written = [line for home in homes for line in read(ledger_path(home))]
    assert written == [f"{key}\tonce"], "the effect happened once"


def test_a_tool_step_run_again_after_it_finished_returns_the_recorded_result(
    own: LiveStack,
) -> None:
    """The agent's own step, run a second time after it finished: Restate restarts the
    wake as new from its journal just after the record was read (`restart-as-new`; the
    entries after it name the old invocation), so the turn's steps run again, the tool
    step with the same idempotency key, as it would if its result had been lost."""
    address = "acme.effects.again"
    with RestateAdmin(own.settings.admin_url) as admin:
        admin.retain_journals([AGENT])
        invocation, first = wake(own, address, Message(ledger_calls(("once", 0)), spec=SPEC))
        assert first.reply == "done: recorded once"
        entries = admin.journal(invocation).entries
        loaded = next(e for e in entries if e.entry_type == "Notification: GetLazyState")
        restarted = httpx.patch(
            f"{own.settings.admin_url}/invocations/{invocation}/restart-as-new",
            params={"from": loaded.index},
            timeout=30,
        )
        assert restarted.status_code == 200, restarted.text
        new = restarted.json()["new_invocation_id"]
        again = attach(own, new)
        steps = [e.name for e in admin.journal(new).entries if e.entry_type == "Command: Run"]

    assert "tool ledger call_0" in steps, "the new invocation ran the tool step again"
    assert again.reply == "done: recorded once"
    homes = {own.home, own.endpoint.settings.home}
    for path in (ledger_path, started_path):
        lines = [line for home in homes for line in lines_for(read(path(home)), address)]
        assert lines == ["once"], "the tool itself ran once"
