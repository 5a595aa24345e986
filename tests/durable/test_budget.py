"""The round's journal budget (docs/durability.md), read from a real restate-server's
`sys_journal`, so that it cannot silently grow back."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import msgspec
import pytest

from bench.rounds import bench_spec, turn_script
from schemas.events import TurnEnded, WakeResult
from schemas.wake import Message, WakeEnvelope
from services.contracts import AGENT, PROJECTOR, TENANT_USAGE, WAKE
from services.executor.scripted import script
from services.stack.journal import RestateAdmin
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable

ROUNDS = 3
PER_ROUND = {
    "Command: Run": 2,  # the model step and the tool step
    "Notification: Run": 2,
}
PER_WAKE = {
    "Command: Input": 1,
    "Command: Output": 1,
    # the clock, read with the record (the turn's first events' time); the wake's last
    # write to the projection is not a step
    "Command: Run": 1,
    "Notification: Run": 1,
    # the wake's timeline chunk, running, the record (with its copy of the verbatim
    # history, where the turn's segment is kept until a fold moves past it)
    "Command: SetState": 3,
    "Command: GetLazyState": 1,  # the record, with the clock: one round trip
    "Notification: GetLazyState": 1,
    # the tenant's tokens of the day (TEASPILL_TENANT_DAILY_TOKENS): lent before the first
    # model step, for this turn's rounds...
    "Command: Call": 1,
    "Notification: Call": 1,
    # ...and settled one-way at the end
    "Command: OneWayCall": 1,
    "Notification: CallInvocationId": 2,
}
"""Docs: docs/durability.md, "The round's journal budget"."""


@pytest.fixture(scope="module")
def admin(stack: LiveStack) -> Iterator[RestateAdmin]:
    with RestateAdmin(stack.settings.admin_url) as client:
        client.retain_journals([AGENT, PROJECTOR])
        yield client


def wake(stack: LiveStack, address: str, turn: int, harness: str = "loop") -> str:
    """A calculator turn of ROUNDS rounds; returns the wake's invocation id. Under the
    `plan` harness a plan is written first, as one more round."""
    spec = bench_spec(ROUNDS)
    text = turn_script(turn, ROUNDS)
    if harness == "plan":
        spec = msgspec.structs.replace(
            spec,
            harness=harness,
            limits=msgspec.structs.replace(spec.limits, max_rounds=ROUNDS + 1),
        )
        text = script({"reply": "1. Calculate.\n2. Reply."}) + "\n" + text
    message = Message(text, spec=spec)
    answer = httpx.post(
        f"{stack.settings.ingress_url}{WAKE.path(address)}",
        content=msgspec.json.encode(WakeEnvelope(message)),
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    assert answer.status_code == 200, answer.text
    assert msgspec.json.decode(answer.content, type=WakeResult).reply == f"turn {turn} done"
    return answer.headers["x-restate-id"]


def budget_of(rounds: int, plans: int = 0) -> dict[str, int]:
    """What a wake of `rounds` rounds may journal; a plan is a model step more."""
    budget = {kind: n * rounds for kind, n in PER_ROUND.items()}
    for kind, n in PER_WAKE.items():
        budget[kind] = budget.get(kind, 0) + n
    # The last round replies: it has a model step and no tool step.
    budget["Command: Run"] -= 1 - plans
    budget["Notification: Run"] -= 1 - plans
    return budget


def test_a_round_journals_its_two_steps_and_nothing_else(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    wake(stack, address, 1)  # the first turn creates the agent's state
    journal = admin.journal(wake(stack, address, 2))
    counted = {kind: tally.entries for kind, tally in journal.by_type().items()}
    assert counted == budget_of(ROUNDS)
    steps = [e.name for e in journal.entries if e.entry_type == "Command: Run"]
    assert steps == ["timestamp", "model script r1", "tool calculator call_0", "model script r2",
                     "tool calculator call_0", "model script r3"]  # fmt: skip


def test_another_harness_keeps_the_same_budget_its_plan_one_model_step_more(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    """The plan-then-execute harness runs through the same driver: its rounds journal what
    the loop's do, and its plan is one model step (no tool step, nothing per wake)."""
    wake(stack, address, 1, "plan")
    journal = admin.journal(wake(stack, address, 2, "plan"))
    counted = {kind: tally.entries for kind, tally in journal.by_type().items()}
    assert counted == budget_of(ROUNDS, plans=1)
    steps = [e.name for e in journal.entries if e.entry_type == "Command: Run"]
    assert steps == ["timestamp", "model script r1", "model script r2", "tool calculator call_0",
                     "model script r3", "tool calculator call_0", "model script r4"]  # fmt: skip
    # a co-located model is a local step, not a call, and the projection is written in
    # this process: the wake's one call and one send are the tenant's tokens (the next
    # test names them)


def test_a_wake_invokes_only_its_tenants_tokens_and_its_events_are_projected_when_it_returns(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    wake(stack, address, 1)
    invocation = wake(stack, address, 2)
    invoked = [
        (i.target_service_name, i.target_handler_name)
        for i in admin.invocations()
        if i.invoked_by_id == invocation
    ]
    assert sorted(invoked) == [(TENANT_USAGE, "lease"), (TENANT_USAGE, "settle")]
    events = stack.events(address)
    assert isinstance(events[-1].body, TurnEnded)
    assert events[-1].turn == 2
    assert stack.shown(address) == events


def test_journal_bytes_do_not_grow_with_the_timeline(
    stack: LiveStack, admin: RestateAdmin, address: str
) -> None:
    """A wake writes its events once, as one chunk: the tenth turn's chunk is no larger
    than the second's."""
    written = []
    for turn in range(1, 11):
        invocation = wake(stack, address, turn)
        chunks = admin.query(
            "SELECT raw_length FROM sys_journal"  # noqa: S608 - an id Restate gave
            f" WHERE id = '{invocation}' AND entry_type = 'Command: SetState'"
            """ AND entry_lite_json LIKE '%"key":"timeline.%'"""
        )
        assert len(chunks) == 1, f"turn {turn} wrote {len(chunks)} timeline chunks"
        written.append(int(chunks[0]["raw_length"]))
    assert written[-1] <= 1.1 * written[1], written
