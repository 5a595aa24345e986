"""An agent whose state the release before wrote goes on where it was: its record without
the copy of the verbatim history, that copy under its own key (`recent`), and `running`
cleared by its last wake. The state is rewritten to that layout through Restate's admin
API, on a real restate-server."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from schemas.events import ModelMessage
from schemas.state import AgentRecord
from services.agent.store import RECENT, RECORD, RUNNING, segment_key
from services.contracts import AGENT
from services.stack.journal import RestateAdmin
from tests.durable.conftest import LiveStack, eventually
from tests.durable.test_budget import wake

TURNS = 3


def state(admin: RestateAdmin, address: str) -> dict[str, str]:
    rows = admin.query(
        "SELECT key, value_utf8 FROM state"  # noqa: S608 - an address the test made
        f" WHERE service_name = '{AGENT}' AND service_key = '{address}'"
    )
    return {str(row["key"]): str(row["value_utf8"]) for row in rows}


def as_before(current: dict[str, str]) -> dict[str, str]:
    """The same agent as the release before kept it: each segment under its own key too."""
    record = msgspec.json.decode(current[RECORD], type=AgentRecord)
    assert record.recent is not None
    old: dict[str, Any] = {k: v for k, v in current.items() if k not in (RECORD, RUNNING)}
    for index, segment in zip(record.recent.indices, record.recent.segments, strict=True):
        old[segment_key(index)] = msgspec.json.encode(segment).decode()
    old[RECORD] = msgspec.json.encode(
        msgspec.structs.replace(record, recent=None, finished="")
    ).decode()
    old[RECENT] = msgspec.json.encode(record.recent).decode()
    return old


def replace_state(stack: LiveStack, admin: RestateAdmin, address: str, new: dict[str, str]) -> None:
    answer = httpx.post(
        f"{stack.settings.admin_url}/services/{AGENT}/state",
        json={
            "object_key": address,
            "new_state": {key: list(value.encode()) for key, value in new.items()},
        },
        timeout=30.0,
    )
    assert answer.is_success, answer.text
    eventually(lambda: state(admin, address) == new or None, 30.0, "the state is replaced")


def first_prompt_tokens(stack: LiveStack, address: str, turn: int) -> int:
    """What the `script` model counted of the turn's first prompt (its words): the same
    history shown gives the same count."""
    for event in stack.events(address):
        if event.turn == turn and isinstance(event.body, ModelMessage):
            return event.body.usage.prompt_tokens
    raise AssertionError(f"turn {turn} of {address} has no model message")


def test_an_agent_from_before_the_copy_moved_reads_its_history_and_moves_the_copy(
    stack: LiveStack, address: str
) -> None:
    kept = f"{address}-kept"
    with RestateAdmin(stack.settings.admin_url) as admin:
        for turn in range(1, TURNS):
            wake(stack, address, turn)
            wake(stack, kept, turn)
        replace_state(stack, admin, address, as_before(state(admin, address)))

        wake(stack, address, TURNS)
        wake(stack, kept, TURNS)

        after = state(admin, address)
    assert RECENT not in after, "the old key is cleared once the record holds the copy"
    record = msgspec.json.decode(after[RECORD], type=AgentRecord)
    context, copy = record.context, record.recent
    assert copy is not None
    assert copy.first == context.folded
    assert len(copy.segments) == context.segments - context.folded == TURNS
    assert first_prompt_tokens(stack, address, TURNS) == first_prompt_tokens(stack, kept, TURNS)
    kinds = [type(e.body) for e in stack.events(address)]
    assert kinds == [type(e.body) for e in stack.events(kept)]


def test_a_stop_after_the_wake_returned_finds_no_running_turn(
    stack: LiveStack, address: str
) -> None:
    """`running` still names the last wake once it returned; the record says it finished."""
    wake(stack, address, 1)
    with RestateAdmin(stack.settings.admin_url) as admin:
        kept = state(admin, address)
    record = msgspec.json.decode(kept[RECORD], type=AgentRecord)
    assert msgspec.json.decode(kept[RUNNING], type=str) == record.finished != ""
    assert stack.ingress.status(address).state == "idle"
    answer = stack.ingress.stop(address)
    assert answer.message == f"{address} has no turn in progress; there is nothing to stop."
