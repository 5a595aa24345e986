"""`services.stack.journal` reads what a real restate-server journaled: the plain loop of
`bench/plain.py`, served by its own endpoint on the suite's restate-server, runs turns of
known shape, and their journals are read back through the admin API."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import msgspec
import pytest

from bench.baseline import plain_endpoint, plain_settings, start_plain
from bench.plain import HANDLER, SERVICE, PlainReply, PlainTurn
from bench.rounds import turn_script
from services.stack.journal import RestateAdmin
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable


@pytest.fixture(scope="module")
def admin(stack: LiveStack) -> Iterator[RestateAdmin]:
    """The plain loop registered on the suite's restate-server, keeping its journals."""
    endpoint = plain_endpoint(plain_settings(stack.settings))
    start_plain(endpoint)
    try:
        with RestateAdmin(stack.settings.admin_url) as client:
            client.retain_journals([SERVICE])
            yield client
    finally:
        endpoint.stop()


def run_turn(stack: LiveStack, key: str, turn: int, rounds: int) -> str:
    """One turn of `rounds` rounds (rounds-1 calculator calls, then the reply); returns its
    invocation id, which Restate sends back with the answer."""
    body = msgspec.json.encode(PlainTurn(turn_script(turn, rounds), rounds))
    answer = httpx.post(
        f"{stack.settings.ingress_url}/{SERVICE}/{key}/{HANDLER}",
        content=body,
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    assert answer.status_code == 200, answer.text
    assert msgspec.json.decode(answer.content, type=PlainReply).rounds == rounds
    return answer.headers["x-restate-id"]


@pytest.mark.parametrize("rounds", [1, 3, 5])
def test_each_round_journals_its_model_and_tool_steps(
    stack: LiveStack, admin: RestateAdmin, address: str, rounds: int
) -> None:
    invocation = run_turn(stack, address, 1, rounds)
    journal = admin.journal(invocation)
    steps = 2 * rounds - 1  # a model step per round, a tool step in all but the last
    # The input, reading the history, a command and its result per step, writing the
    # history, the output.
    assert journal.size.entries == 2 + 2 * steps + 2
    assert [e.index for e in journal.entries] == list(range(journal.size.entries))
    kinds = journal.by_type()
    assert kinds["Command: Run"].entries == steps
    assert kinds["Notification: Run"].entries == steps
    assert {kind: kinds[kind].entries for kind in kinds if "Run" not in kind} == {
        "Command: Input": 1,
        "Command: GetEagerState": 1,
        "Command: SetState": 1,
        "Command: Output": 1,
    }
    names = [e.name for e in journal.entries if e.entry_type == "Command: Run"]
    assert names == ["model", "tool calculator call_0"] * (rounds - 1) + ["model"]
    assert all(e.raw_length > 0 for e in journal.entries)
    assert journal.size.bytes == sum(e.raw_length for e in journal.entries)


def test_the_invocation_is_found_with_its_target(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    before = {invocation.id for invocation in admin.invocations()}
    invocation = run_turn(stack, address, 1, 2)
    [found] = admin.invocations([invocation])
    assert (found.target_service_name, found.target_handler_name) == (SERVICE, HANDLER)
    assert (found.target_service_key, found.status) == (address, "completed")
    # Other tests' agents share this server, so more may have started meanwhile.
    assert found in admin.finished_since(before)
    assert invocation not in before


def test_a_growing_history_shows_in_the_bytes_not_the_entries(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    first, second = (admin.journal(run_turn(stack, address, n, 2)) for n in (1, 2))
    assert first.size.entries == second.size.entries
    state = "Command: SetState"
    assert second.by_type()[state].bytes > first.by_type()[state].bytes
    assert first.by_type()[state].entries == 1
