"""AG-UI in process: the translation of a turn, and the route's keys and answers. The
route against the official JS client on a real stack is in tests/agui."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

from schemas.chat import ToolCall
from schemas.events import (
    ApprovalRefused,
    ApprovalRequested,
    Event,
    EventBody,
    MessageRejected,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
)
from schemas.live import LiveBatch, LiveDelta, Retraction
from schemas.model import Usage
from schemas.questions import Question
from services.gateway.agui import Item, Run, call_id, parse_call_id
from tests.gateway.conftest import LIVE_TOKEN, World

T0 = datetime(2026, 12, 1, tzinfo=UTC)
EVENTS: TypeAdapter[Any] = TypeAdapter(AguiEvent)


def at(seq: int, round_: int, body: EventBody, turn: int = 1) -> Event:
    return Event("acme.new", seq, turn, round_, T0, body)


def dumped(events: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(e.model_dump_json(by_alias=True)) for e in events]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


CALL = ToolCall("call_0", "calculator", {"expression": "6*7"})
TURN = [
    at(1, 1, TurnStarted("what is 6*7", "helper", 1, message_id="m1")),
    at(2, 1, ModelMessage("m", "", (CALL,), Usage(10, 2))),
    at(3, 1, ToolCalled("call_0", "calculator", {"expression": "6*7"})),
    at(4, 1, ToolFinished("call_0", "calculator", "ok", "42")),
    at(5, 2, ModelMessage("m", "It is 42", (), Usage(12, 3))),
    at(6, 2, TurnEnded("succeeded", "It is 42", usage=Usage(22, 5))),
]


def test_a_turn_becomes_a_valid_ag_ui_sequence() -> None:
    run = Run("acme.new", "acme.new", "r1", "m1")
    out: list[Any] = []
    items: list[Item] = [*TURN[:4], LiveDelta("acme.new", 1, 2, "a", 0, "It is"), *TURN[4:]]
    for item in items:
        out += run.take(item)
    events = dumped(out)
    for event in events:
        EVENTS.validate_python(event)
    assert types(events) == [
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "RUN_FINISHED",
    ]  # fmt: skip
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "It is 42"
    assert events[-1]["result"] == "It is 42"
    assert events[-1]["threadId"] == "acme.new"
    assert events[-1]["usage"] == [
        {"inputTokens": 22, "outputTokens": 5, "totalTokens": 27, "cachedInputTokens": 0}
    ]
    assert run.finished
    assert run.take(TURN[0]) == []


def test_other_turns_are_left_out() -> None:
    run = Run("acme.new", "acme.new", "r1", "m2")
    earlier = at(1, 1, TurnEnded("succeeded", "old"), turn=1)
    assert run.take(earlier) == []
    assert run.take(at(2, 1, TurnStarted("mine", "helper", 1, message_id="m2"), turn=2)) == []
    assert run.turn == 2


def test_an_approval_ends_the_run_with_an_interrupt() -> None:
    run = Run("acme.new", "acme.new", "r1", "m1")
    run.take(TURN[0])
    asked = at(2, 1, ApprovalRequested("t1r1-call_0", "call_0", "calculator", {"a": 1}))
    events = dumped(run.take(asked))
    assert types(events) == ["RUN_FINISHED"]
    interrupt = events[0]["outcome"]["interrupts"][0]
    assert (interrupt["id"], interrupt["toolCallId"]) == ("t1r1-call_0", "t1r1-call_0")
    assert events[0]["outcome"]["type"] == "interrupt"


def test_a_call_of_a_page_tool_ends_the_run_for_the_client_to_run_it() -> None:
    run = Run("acme.new", "acme.new", "r1", "m1")
    run.take(TURN[0])
    called = dumped(run.take(at(2, 1, ToolCalled("call_0", "read_title", {}))))
    asked = at(3, 1, ApprovalRequested("t1r1-call_0", "call_0", "read_title", page=True))
    events = dumped(run.take(asked))
    assert types(called) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert called[0]["toolCallId"] == call_id(1, 1, "call_0")
    assert types(events) == ["RUN_FINISHED"]
    assert "outcome" not in events[0] or events[0]["outcome"] is None
    assert run.finished


def test_a_call_id_is_read_back_into_its_turn_round_and_call() -> None:
    assert parse_call_id(call_id(12, 3, "call_0")) == (12, 3, "call_0")
    assert parse_call_id(call_id(1, 1, "t2r2-x")) == (1, 1, "t2r2-x")
    for other in ("", "call_0", "t1r-x", "tr1-x", "t1r1-", "t1r1x", " t1r1-x", "t1r1-x\n" * 40):
        assert parse_call_id(other) is None, other


def test_a_resumed_run_whose_answer_is_refused_ends_with_the_agents_sentence() -> None:
    run = Run("acme.new", "acme.new", "r2", turn=1, answering=("t1r1-call_0",))
    sentence = "Approval request 't1r1-call_0' was already answered; nothing was changed."
    other = at(7, 1, ApprovalRefused("t1r1-call_9", "unknown_request", True, message="No."))
    assert run.take(other) == []
    refused = at(8, 1, ApprovalRefused("t1r1-call_0", "already_answered", True, message=sentence))
    events = dumped(run.take(refused))
    assert types(events) == ["RUN_ERROR"]
    assert (events[0]["message"], events[0]["code"]) == (sentence, "approval_refused")
    assert run.finished


def test_a_message_the_agent_refuses_ends_the_run_with_its_sentence() -> None:
    run = Run("acme.new", "acme.new", "r1", "m2")
    sentence = "The agent used 40 model tokens on 2026-12-01 (UTC), its limit for a day."
    assert run.take(at(7, 0, MessageRejected("hi", message_id="m9", message="No."), 0)) == []
    events = dumped(run.take(at(8, 0, MessageRejected("hi", message_id="m2", message=sentence), 0)))
    assert types(events) == ["RUN_ERROR"]
    assert (events[0]["message"], events[0]["code"]) == (sentence, "rejected")
    assert run.finished
    EVENTS.validate_python(events[0])


def test_a_failed_turn_is_a_run_error_and_a_stopped_one_cancelled() -> None:
    run = Run("acme.new", "acme.new", "r1", "m1")
    run.take(TURN[0])
    run.take(LiveDelta("acme.new", 1, 1, "a", 0, "Half"))
    events = dumped(run.take(at(2, 1, TurnEnded("failed", reason="The model step failed."))))
    assert types(events) == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert events[1]["message"] == "The model step failed."
    stopped = Run("acme.new", "acme.new", "r2", "m1")
    stopped.take(TURN[0])
    ended = dumped(stopped.take(at(2, 1, TurnEnded("stopped", reason="Stopped."))))
    assert ended[0]["outcome"] == {"type": "cancelled"}


def test_a_retracted_round_starts_a_new_message() -> None:
    run = Run("acme.new", "acme.new", "r1", "m1")
    run.take(TURN[0])
    first = dumped(run.take(LiveDelta("acme.new", 1, 1, "a", 0, "Wro")))
    ended = dumped(run.take(Retraction("acme.new", 1, 1)))
    again = dumped(run.take(LiveDelta("acme.new", 1, 1, "b", 0, "Right")))
    assert types(ended) == ["TEXT_MESSAGE_END"]
    assert first[0]["messageId"] != again[0]["messageId"]
    assert run.retracted


pytestmark = pytest.mark.anyio


async def read_run(world: World, body: dict[str, Any], key: str = "write") -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with world.streams.stream(
        "POST", "/v1/agui", json=body, headers=world.auth(key)
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    break
    return events


def run_input(text: str | None, thread: str = "acme.alpha", **extra: Any) -> dict[str, Any]:
    messages = [{"id": "u1", "role": "user", "content": text}] if text else []
    return {"threadId": thread, "runId": "r1", "messages": messages, **extra}


def played(turn: int, first_seq: int, reply: str, message_id: str) -> list[Event]:
    """TURN as the agent's turn `turn`, started by the message `message_id`."""
    events = [
        Event("acme.alpha", first_seq + i, turn, e.round, T0, e.body) for i, e in enumerate(TURN)
    ]
    started = TurnStarted("hello", "helper", 1, message_id=message_id)
    ended = TurnEnded("succeeded", reply, usage=Usage(22, 5))
    return [
        msgspec.structs.replace(events[0], body=started),
        *events[1:-1],
        msgspec.structs.replace(events[-1], body=ended),
    ]


async def test_the_route_sends_the_message_and_streams_the_turn(world: World) -> None:
    async def turn() -> None:
        sent = await world.ingress.arrivals.get()
        events = played(3, 13, "It is 42", sent["wake"]["id"])
        await world.record(events[:3])
        batch = LiveBatch((LiveDelta("acme.alpha", 3, 2, "a", 0, "It is"),))
        await world.client.post(
            "/internal/live",
            content=msgspec.json.encode(batch),
            headers={"X-Teaspill-Live-Token": LIVE_TOKEN},
        )
        await world.record(events[3:])

    task = asyncio.create_task(turn())
    events = await read_run(world, run_input("hello", forwardedProps={"kind": "helper"}))
    await task
    for event in events:
        EVENTS.validate_python(event)
    assert types(events)[0] == "RUN_STARTED"
    assert types(events)[-1] == "RUN_FINISHED"
    assert "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == (
        "It is 42"
    )
    address, body, key = world.ingress.sent[-1]
    assert (address, body["wake"]["text"], key) == ("acme.alpha", "hello", "agui r1")


async def test_two_equal_messages_in_a_row_are_two_runs_each_with_its_own_turn(
    world: World,
) -> None:
    """Both runs send "hello" before either turn starts: each run follows the turn its
    own message started, although both turns carry the same text."""
    first = asyncio.create_task(read_run(world, run_input("hello", runId="r1")))
    one = await world.ingress.arrivals.get()
    second = asyncio.create_task(read_run(world, run_input("hello", runId="r2")))
    two = await world.ingress.arrivals.get()
    assert one["wake"]["id"] != two["wake"]["id"]
    await world.record(played(3, 13, "first reply", one["wake"]["id"]))
    await world.record(played(4, 19, "second reply", two["wake"]["id"]))
    runs = await asyncio.gather(first, second)
    assert [run[-1]["type"] for run in runs] == ["RUN_FINISHED", "RUN_FINISHED"]
    assert [(run[-1]["runId"], run[-1]["result"]) for run in runs] == [
        ("r1", "first reply"),
        ("r2", "second reply"),
    ]


async def test_a_run_without_a_message_answers_the_history(world: World) -> None:
    events = await read_run(world, run_input(None), key="read")
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    roles = [m["role"] for m in events[1]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2


@pytest.mark.parametrize(
    ("key", "thread", "status"),
    [("read", "acme.alpha", 403), ("write", "other.secret", 404), ("write", "nope", 400)],
)
async def test_the_route_keeps_the_key_and_tenant_rules(
    world: World, key: str, thread: str, status: int
) -> None:
    response = await world.client.post(
        "/v1/agui", json=run_input("hi", thread), headers=world.auth(key)
    )
    assert response.status_code == status
    assert response.json()["error"]["message"]
    missing = await world.client.post("/v1/agui", json=run_input("hi"))
    assert missing.status_code == 401


def test_a_tools_question_is_an_interrupt_whose_schema_asks_the_form() -> None:
    run = Run("acme.new", "acme.new", "r1", "m1")
    run.take(TURN[0])
    form = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    body = ApprovalRequested(
        "t1r1-call_0-input1",
        "call_0",
        "mcp:shop/order",
        {"item": "tea"},
        {"quantity": Question("How many tea?", form)},
    )
    (finished,) = dumped(run.take(at(2, 1, body)))
    interrupt = finished["outcome"]["interrupts"][0]
    assert (interrupt["reason"], interrupt["message"]) == ("tool_input", "How many tea?")
    schema = interrupt["responseSchema"]
    assert schema["required"] == ["approve"]
    assert schema["properties"]["answers"]["properties"] == {"quantity": form}
