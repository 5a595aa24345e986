"""The round's journal budget (docs/durability.md), read from a real restate-server's
`sys_journal`, so that it cannot silently grow back."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import msgspec
import pytest

from bench.rounds import bench_spec, turn_script
from schemas.events import WakeResult
from schemas.wake import Message, WakeEnvelope
from services.contracts import AGENT, PROJECTOR, WAKE
from services.stack.journal import Invocation, Journal, RestateAdmin
from tests.durable.conftest import LiveStack, eventually

pytestmark = pytest.mark.durable

ROUNDS = 3
PER_ROUND = {
    "Command: Run": 2,  # the model step and the tool step
    "Notification: Run": 2,
    "Command: SetState": 1,  # the round's timeline chunk
    "Command: OneWayCall": 1,  # the round's events to the projector
    "Notification: CallInvocationId": 1,
}
PER_WAKE = {
    "Command: Input": 1,
    "Command: Output": 1,
    "Command: Run": 1,  # the clock, read with the record: the turn's first events' time
    "Notification: Run": 1,
    # the first flush's chunk; running, the record, the history segment, the recent copy
    "Command: SetState": 5,
    "Command: OneWayCall": 1,  # the first flush's events to the projector
    "Notification: CallInvocationId": 1,
    "Command: GetLazyState": 2,  # the record and the recent copy, in one round trip
    "Notification: GetLazyState": 2,
    "Command: ClearState": 1,  # running
}
"""Docs: docs/durability.md, "The round's journal budget"."""


@pytest.fixture(scope="module")
def admin(stack: LiveStack) -> Iterator[RestateAdmin]:
    with RestateAdmin(stack.settings.admin_url) as client:
        client.retain_journals([AGENT, PROJECTOR])
        yield client


def wake(stack: LiveStack, address: str, turn: int) -> str:
    """A calculator turn of ROUNDS rounds; returns the wake's invocation id."""
    message = Message(turn_script(turn, ROUNDS), spec=bench_spec(ROUNDS))
    answer = httpx.post(
        f"{stack.settings.ingress_url}{WAKE.path(address)}",
        content=msgspec.json.encode(WakeEnvelope(message)),
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    assert answer.status_code == 200, answer.text
    assert msgspec.json.decode(answer.content, type=WakeResult).reply == f"turn {turn} done"
    return answer.headers["x-restate-id"]


def made_by(admin: RestateAdmin, invocation: str) -> list[Invocation]:
    def finished() -> list[Invocation] | None:
        made = [i for i in admin.invocations() if i.invoked_by_id == invocation]
        return made if made and all(i.status == "completed" for i in made) else None

    return eventually(finished, 30, "the projector's invocations to finish")


def test_a_round_journals_its_two_steps_one_chunk_and_one_send(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    wake(stack, address, 1)  # the first turn creates the agent's state
    journal = admin.journal(wake(stack, address, 2))
    counted = {kind: tally.entries for kind, tally in journal.by_type().items()}
    budget = {kind: n * ROUNDS for kind, n in PER_ROUND.items()}
    for kind, n in PER_WAKE.items():
        budget[kind] = budget.get(kind, 0) + n
    # The last round replies: it has a model step and no tool step.
    budget["Command: Run"] -= 1
    budget["Notification: Run"] -= 1
    assert counted == budget
    steps = [e.name for e in journal.entries if e.entry_type == "Command: Run"]
    assert steps == ["timestamp", "model script r1", "tool calculator call_0", "model script r2",
                     "tool calculator call_0", "model script r3"]  # fmt: skip
    assert "Command: Call" not in counted, "a co-located model is a local step, not a call"


def test_a_wake_makes_one_projector_invocation_per_round_and_one_more(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    wake(stack, address, 1)
    invocation = wake(stack, address, 2)
    made = made_by(admin, invocation)
    assert {i.target_service_name for i in made} == {PROJECTOR}
    assert len(made) <= ROUNDS + 1
    journals: list[Journal] = admin.journals([i.id for i in made])
    assert all(j.size.entries == 2 for j in journals)  # input and output


def test_journal_bytes_do_not_grow_with_the_timeline(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    """Chunks are written once: the tenth turn's journal writes no more timeline bytes
    than the second's (only the recent copy of the verbatim history grows, until the
    first fold)."""
    written = []
    for turn in range(1, 11):
        journal = admin.journal(wake(stack, address, turn))
        sizes = sorted(e.raw_length for e in journal.entries if e.entry_type == "Command: SetState")
        written.append(sum(sizes[:-2]))  # all but the two largest: recent copy and segment
    assert written[-1] <= 1.1 * written[1], written
