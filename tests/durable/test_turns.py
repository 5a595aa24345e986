"""Turns through a real restate-server: rounds, ordering, idempotency and bad input."""

from __future__ import annotations

import itertools

import pytest

from schemas.events import (
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
)
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.executor.scripted import script
from services.ingress import IngressError
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable

SPEC = AgentSpec(
    kind="tester",
    instructions="Follow the script.",
    model="script",
    tools=("calculator", "ledger", "explode", "crash"),
)


def calculator_script(expression: str) -> str:
    return script(
        {"calls": [{"name": "calculator", "arguments": {"expression": expression}}]},
        {"reply": "The answer is {results}."},
    )


def test_a_turn_runs_two_rounds_and_records_every_event_in_order(
    stack: LiveStack, address: str
) -> None:
    result = stack.ingress.message(address, calculator_script("6*7"), SPEC)

    assert result.reply == "The answer is 42."
    assert result.status.state == "idle"
    events = stack.events(address)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [type(e.body).__name__ for e in events] == [
        "TurnStarted",
        "ModelMessage",
        "ToolCalled",
        "ToolFinished",
        "ModelMessage",
        "TurnEnded",
    ]
    assert [e.round for e in events] == [0, 1, 1, 1, 2, 2]
    assert {e.agent for e in events} == {address}
    assert all(e.turn == 1 for e in events)
    called, finished = events[2].body, events[3].body
    assert isinstance(called, ToolCalled)
    assert called.arguments == {"expression": "6*7"}
    assert isinstance(finished, ToolFinished)
    assert (finished.status, finished.content) == ("ok", "42")
    ended = events[-1].body
    assert isinstance(ended, TurnEnded)
    assert (ended.outcome, ended.reply) == ("succeeded", "The answer is 42.")
    models = [e.body for e in events if isinstance(e.body, ModelMessage)]
    assert ended.usage.prompt_tokens == sum(m.usage.prompt_tokens for m in models) > 0
    assert ended.usage.completion_tokens == sum(m.usage.completion_tokens for m in models)
    assert all(a.at <= b.at for a, b in itertools.pairwise(events))


def test_two_messages_sent_at_once_run_one_after_the_other_in_arrival_order(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, "first contact", SPEC)
    slow = script({"sleep": 1.0, "reply": "slow done"})
    stack.ingress.send_wake(address, Message(slow))
    stack.ingress.send_wake(address, Message("quick"))
    stack.wait_for_turn_end(address, 3)

    events = stack.events(address)
    turns = [(e.turn, type(e.body).__name__) for e in events]
    assert turns == [
        (1, "TurnStarted"), (1, "ModelMessage"), (1, "TurnEnded"),
        (2, "TurnStarted"), (2, "ModelMessage"), (2, "TurnEnded"),
        (3, "TurnStarted"), (3, "ModelMessage"), (3, "TurnEnded"),
    ]  # fmt: skip
    replies = [e.body.reply for e in events if isinstance(e.body, TurnEnded)]
    assert replies == ["You said: first contact", "slow done", "You said: quick"]


def test_the_same_message_sent_twice_with_one_idempotency_key_runs_one_turn(
    stack: LiveStack, address: str
) -> None:
    first = stack.ingress.message(address, "only once", SPEC, key="k-1")
    second = stack.ingress.message(address, "only once", SPEC, key="k-1")

    assert first == second
    started = [e for e in stack.events(address) if isinstance(e.body, TurnStarted)]
    assert len(started) == 1
    assert stack.ingress.status(address).turn == 1


def test_later_turns_see_earlier_ones(stack: LiveStack, address: str) -> None:
    stack.ingress.message(address, "remember me", SPEC)
    stack.ingress.message(address, "and me", SPEC)
    assert stack.ingress.status(address).turn == 2
    models = [e.body for e in stack.events(address) if isinstance(e.body, ModelMessage)]
    assert [m.text for m in models] == ["You said: remember me", "You said: and me"]
    assert models[1].usage.prompt_tokens > models[0].usage.prompt_tokens


@pytest.mark.parametrize("bad", ["no-tenant", "Acme.Upper", "acme..x", "acme.x%20y", "a" * 250])
def test_an_invalid_address_is_refused_with_a_sentence(stack: LiveStack, bad: str) -> None:
    with pytest.raises(IngressError) as refused:
        stack.ingress.message(bad, "hi", SPEC)
    assert refused.value.status == 400
    assert "agent address" in refused.value.message


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"wake": {"type": "message"}}', b'{"wake": {"type": "dance"}}', b"[]"],
)
def test_a_malformed_wake_is_refused_and_the_agent_still_works(
    stack: LiveStack, address: str, body: bytes
) -> None:
    response = stack.ingress._http.post(
        f"/Agent/{address}/wake", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "The wake is not valid" in response.json()["message"]
    assert stack.ingress.message(address, "still here", SPEC).reply == "You said: still here"


def test_a_first_message_without_a_spec_is_refused(stack: LiveStack, address: str) -> None:
    with pytest.raises(IngressError) as refused:
        stack.ingress.message(address, "who am I?")
    assert refused.value.status == 404
    assert "has no spec yet" in refused.value.message


@pytest.mark.parametrize(
    ("tool", "status", "says"),
    [
        ("no_such_tool", "error", "no tool named 'no_such_tool'"),
        ("explode", "error", "always fails"),
        ("crash", "error", "The tool crash failed with an unexpected error"),
    ],
)
def test_a_bad_tool_call_becomes_a_recorded_failed_result(
    stack: LiveStack, address: str, tool: str, status: str, says: str
) -> None:
    text = script({"calls": [{"name": tool}]}, {"reply": "after: {results}"})
    result = stack.ingress.message(address, text, SPEC)

    assert result.status.state == "idle"
    assert says in result.reply
    finished = [e.body for e in stack.events(address) if isinstance(e.body, ToolFinished)]
    assert [(f.name, f.status) for f in finished] == [(tool, status)]
    assert says in finished[0].content
