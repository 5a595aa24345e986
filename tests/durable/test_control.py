"""Turn control through a real restate-server: approvals, parking, supersede, stop,
budgets and observers."""

from __future__ import annotations

import time
from collections import Counter

import msgspec
import pytest

from schemas.events import (
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRequested,
    Event,
    MessageRejected,
    ModelMessage,
    StopRefused,
    ToolFinished,
    TurnEnded,
    TurnParked,
    TurnStarted,
)
from schemas.spec import AgentSpec, Limits
from schemas.wake import Approval, Message, Stop
from services.agent.machine import NOTHING_TO_STOP
from services.executor.scripted import script
from services.ingress import IngressError
from tests.durable.conftest import LiveStack, eventually
from tests.fixtures.observers import seen_path
from tests.fixtures.tools import ledger_path

pytestmark = pytest.mark.durable

GUARDED = AgentSpec(
    kind="guarded",
    instructions="Follow the script.",
    model="script",
    tools={"ledger": "ask", "calculator": "allow"},
)
LEDGER_THEN_REPLY = script(
    {"calls": [{"name": "ledger", "arguments": {"entry": "approved-entry"}}]},
    {"reply": "wrote: {results}"},
)


def requested(stack: LiveStack, address: str) -> ApprovalRequested:
    def find() -> ApprovalRequested | None:
        found = [e.body for e in stack.events(address) if isinstance(e.body, ApprovalRequested)]
        return found[-1] if found else None

    return eventually(find, 30, "an approval request")


def ledger_entries(stack: LiveStack, address: str) -> Counter[str]:
    path = ledger_path(stack.home)
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split("\t")[1] for line in lines if line.startswith(f"{address}/"))


def bodies(stack: LiveStack, address: str, kind: type) -> list[object]:
    return [e.body for e in stack.events(address) if isinstance(e.body, kind)]


def shown(stack: LiveStack, address: str, kind: type) -> list[object]:
    """What a UI shows while the wake runs (Restate's copy gets its events at the end)."""
    return [e.body for e in stack.shown(address) if isinstance(e.body, kind)]


def test_an_ask_tool_waits_survives_sigkill_and_runs_once_when_approved_twice(
    stack: LiveStack, address: str
) -> None:
    waiting = stack.ingress.message(address, LEDGER_THEN_REPLY, GUARDED)
    assert waiting.status.state == "waiting"
    request = requested(stack, address)
    assert (request.name, request.arguments) == ("ledger", {"entry": "approved-entry"})
    assert ledger_entries(stack, address) == Counter()

    stack.restart_endpoint(kill=True)
    done = stack.ingress.wake(address, Approval(request.request_id, approve=True, by="ops"))
    with pytest.raises(IngressError) as twice:
        stack.ingress.wake(address, Approval(request.request_id, approve=True))

    assert done.reply == "wrote: recorded approved-entry"
    assert twice.value.status == 409
    assert "already answered" in twice.value.message
    assert ledger_entries(stack, address) == Counter({"approved-entry": 1})
    answered = bodies(stack, address, ApprovalAnswered)
    assert answered == [ApprovalAnswered(request.request_id, True, "", "ops")]


def test_a_denied_call_does_not_run_and_an_unknown_request_is_refused(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, LEDGER_THEN_REPLY, GUARDED)
    request = requested(stack, address)
    with pytest.raises(IngressError) as unknown:
        stack.ingress.wake(address, Approval("t9r9-call_0", approve=True))
    assert unknown.value.status == 404

    done = stack.ingress.wake(address, Approval(request.request_id, approve=False, note="no"))
    assert "A person denied this call. Their note: no" in done.reply
    assert ledger_entries(stack, address) == Counter()


def test_a_turn_parked_by_timeout_resumes_when_its_answer_arrives(
    stack: LiveStack, address: str
) -> None:
    spec = msgspec.structs.replace(GUARDED, limits=Limits(approval_timeout=1))
    stack.ingress.message(address, LEDGER_THEN_REPLY, spec)
    request = requested(stack, address)
    eventually(lambda: bodies(stack, address, TurnParked) or None, 30, "the turn to park")
    assert stack.ingress.status(address).state == "parked"

    done = stack.ingress.wake(address, Approval(request.request_id, approve=True))
    assert done.reply == "wrote: recorded approved-entry"
    ended = bodies(stack, address, TurnEnded)
    assert [e.outcome for e in ended if isinstance(e, TurnEnded)] == ["succeeded"]


def test_a_new_message_supersedes_a_turn_waiting_for_approval(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, LEDGER_THEN_REPLY, GUARDED)
    request = requested(stack, address)
    result = stack.ingress.message(address, "never mind")

    assert result.reply == "You said: never mind"
    assert bodies(stack, address, ApprovalAbandoned) == [
        ApprovalAbandoned(request.request_id, "unknown")
    ]
    outcomes = [e.outcome for e in bodies(stack, address, TurnEnded) if isinstance(e, TurnEnded)]
    assert outcomes == ["superseded", "succeeded"]
    with pytest.raises(IngressError) as late:
        stack.ingress.wake(address, Approval(request.request_id, approve=True))
    assert late.value.status == 409
    assert ledger_entries(stack, address) == Counter()


def ended_within(stack: LiveStack, address: str, seconds: float) -> TurnEnded:
    started = time.monotonic()
    answer = stack.ingress.stop(address)
    assert answer.stopping
    ended = stack.wait_for_turn_end(address, 1, timeout=seconds)
    assert time.monotonic() - started < seconds
    return ended


def test_stop_ends_a_slow_model_round_within_seconds(stack: LiveStack, address: str) -> None:
    spec = msgspec.structs.replace(GUARDED, tools=("calculator",))
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]},
        {"sleep": 60, "reply": "never"},
    )
    stack.ingress.send_wake(address, Message(text, spec=spec))
    eventually(lambda: len(shown(stack, address, ModelMessage)) == 1 or None, 30, "round 2")
    ended = ended_within(stack, address, 3)

    assert ended.outcome == "stopped"
    assert ended.usage.prompt_tokens > 0, "the finished round's tokens are recorded"
    assert stack.ingress.status(address).state == "idle"
    after = stack.ingress.message(address, "still there?")
    assert after.reply == "You said: still there?"


def test_stop_ends_a_turn_in_the_middle_of_a_slow_tool_step(stack: LiveStack, address: str) -> None:
    spec = msgspec.structs.replace(GUARDED, tools=("ledger",))
    text = script({"calls": [{"name": "ledger", "arguments": {"entry": "x", "seconds": 60}}]})
    stack.ingress.send_wake(address, Message(text, spec=spec))
    eventually(lambda: stack.ingress.status(address).state == "running" or None, 30, "a turn")
    eventually(lambda: len(stack.shown(address)) >= 3 or None, 30, "the tool step")
    assert ended_within(stack, address, 3).outcome == "stopped"


def test_stop_ends_a_waiting_turn_and_is_a_clear_no_op_on_an_idle_agent(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, LEDGER_THEN_REPLY, GUARDED)
    requested(stack, address)
    assert ended_within(stack, address, 5).outcome == "stopped"
    assert bodies(stack, address, ApprovalAbandoned)

    idle = stack.ingress.stop(address)
    assert not idle.stopping
    assert "nothing to stop" in idle.message
    woken = stack.ingress.wake(address, Stop())
    assert "nothing to stop" in woken.note


def test_a_stop_naming_an_ended_turn_never_stops_the_next_one(
    stack: LiveStack, address: str
) -> None:
    stack.ingress.message(address, "first", GUARDED)
    stack.ingress.send_wake(address, Message(script({"sleep": 3, "reply": "second done"})))
    eventually(lambda: stack.ingress.status(address).state == "running" or None, 30, "turn 2")
    answer = stack.ingress.stop(address, turn=1)
    assert not answer.stopping
    assert "not turn 1" in answer.message
    ended = stack.wait_for_turn_end(address, 2, timeout=30)
    assert (ended.outcome, ended.reply) == ("succeeded", "second done")
    refused = eventually(lambda: bodies(stack, address, StopRefused) or None, 30, "the refusal")
    assert refused == [StopRefused(message=NOTHING_TO_STOP)], "turn 2 had ended by then"


def budget_spec(**limits: float) -> AgentSpec:
    return msgspec.structs.replace(
        GUARDED,
        tools=("calculator",),
        limits=Limits(**limits),  # type: ignore[arg-type]
    )


CALCULATE_FOREVER = script(
    *[{"calls": [{"name": "calculator", "arguments": {"expression": "1"}}]}] * 6
)


@pytest.mark.parametrize(
    ("limits", "sentence"),
    [
        ({"max_rounds": 2}, "used all 2 rounds"),
        ({"max_turn_tokens": 30}, "limit of 30 model tokens"),
        ({"max_turn_seconds": 1}, "limit of 1 seconds of running time"),
    ],
)
def test_each_turn_budget_ends_the_turn_with_its_sentence(
    stack: LiveStack, address: str, limits: dict[str, float], sentence: str
) -> None:
    text = CALCULATE_FOREVER
    if "max_turn_seconds" in limits:
        text = script(
            {"sleep": 1.5, "calls": [{"name": "calculator", "arguments": {"expression": "1"}}]},
            {"reply": "late"},
        )
    stack.ingress.message(address, text, budget_spec(**limits))
    ended = stack.wait_for_turn_end(address, 1)
    assert ended.outcome == "failed"
    assert sentence in ended.reason


def test_the_daily_budget_refuses_the_next_turn_before_it_starts(
    stack: LiveStack, address: str
) -> None:
    spec = budget_spec(max_daily_tokens=5)
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]},
        {"reply": "ran to its end"},
    )
    first = stack.ingress.message(address, text, spec)
    assert first.reply == "ran to its end", "the turn that passed the day was not cut"
    assert first.status.tokens_used > 5

    with pytest.raises(IngressError) as refused:
        stack.ingress.message(address, "and again")
    assert refused.value.status == 429
    assert f"tokens on {first.status.tokens_day} (UTC), its limit" in refused.value.message
    assert [e.turn for e in stack.events(address) if isinstance(e.body, TurnStarted)] == [1]
    rejected = [
        e.body.message for e in stack.events(address) if isinstance(e.body, MessageRejected)
    ]
    assert rejected == [refused.value.message]
    assert len(bodies(stack, address, ModelMessage)) == 2


def charged(events: list[Event]) -> int:
    return sum(
        e.body.usage.prompt_tokens + e.body.usage.completion_tokens
        for e in events
        if isinstance(e.body, ModelMessage)
    )


def test_the_ledger_survives_sigkill_between_reservation_and_use(
    stack: LiveStack, address: str
) -> None:
    spec = budget_spec(max_daily_tokens=100_000)
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "2*3"}}]},
        {"sleep": 3, "reply": "slow answer"},
    )
    stack.ingress.send_wake(address, Message(text, spec=spec))
    eventually(lambda: len(shown(stack, address, ModelMessage)) == 1 or None, 30, "round 2")
    stack.restart_endpoint(kill=True)
    stack.wait_for_turn_end(address, 1)

    status = stack.ingress.status(address)
    assert status.tokens_used == charged(stack.events(address)) > 0


def test_an_observer_that_raises_does_not_affect_the_turn(stack: LiveStack, address: str) -> None:
    result = stack.ingress.message(address, "observed", AgentSpec("o", "x", model="script"))
    assert result.reply == "You said: observed"
    seen = seen_path(stack.home).read_text().splitlines()
    assert [line for line in seen if line.startswith(f"{address}\t")] == [
        f"{address}\t{seq}" for seq in range(1, result.status.last_seq + 1)
    ]


def test_tool_arguments_that_do_not_fit_the_schema_are_refused(
    stack: LiveStack, address: str
) -> None:
    spec = budget_spec()
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": 42}}]},
        {"reply": "{results}"},
    )
    result = stack.ingress.message(address, text, spec)
    finished = bodies(stack, address, ToolFinished)
    assert [(f.status) for f in finished if isinstance(f, ToolFinished)] == ["error"]
    assert (
        "The arguments of calculator are not valid: expression: 42 is not of type 'string'"
        in result.reply
    )
