"""A step's result is written by the serde `services.durable.step_options` gives it, and
journals written before (by the SDK's default serde) must replay: each reads what the
other wrote."""

from __future__ import annotations

import pytest
from restate.serde import DefaultSerde, MsgspecJsonSerde

from schemas.chat import ChatMessage, ToolCall
from schemas.harness import ToolResult
from schemas.model import ModelReply, Usage
from services.durable import step_options

REPLY = ModelReply(
    ChatMessage(
        role="assistant",
        content="",
        tool_calls=(ToolCall("c1", "calculator", {"expression": '2+2 ü "'}),),
    ),
    Usage(12, 3),
    model="script",
    started=1764601234.123456,
    finished=1764601234.5,
)
RESULT = ToolResult("c1", "calculator", "ok", "4", started=1.0, finished=2.5)


@pytest.mark.parametrize("value", [REPLY, RESULT])
def test_a_struct_is_written_as_the_default_serde_writes_it(value: object) -> None:
    ours, theirs = step_options(type(value)).serde, DefaultSerde(type(value))
    assert ours.serialize(value) == theirs.serialize(value)
    assert ours.deserialize(theirs.serialize(value)) == value
    assert theirs.deserialize(ours.serialize(value)) == value


@pytest.mark.parametrize("at", [1764601234.123456, 0.1, 1e16, 1e-7, 0.0])
def test_a_time_reads_back_whichever_serde_wrote_it(at: float) -> None:
    ours, theirs = step_options(float).serde, DefaultSerde(float)
    assert ours.deserialize(theirs.serialize(at)) == at
    assert theirs.deserialize(ours.serialize(at)) == at


def test_a_step_that_returns_nothing_journals_nothing() -> None:
    ours, theirs = step_options(type(None)).serde, DefaultSerde(type(None))
    assert ours.serialize(None) == theirs.serialize(None) == b""
    assert ours.deserialize(b"") is None


def test_options_carry_the_attempts_and_the_msgspec_serde() -> None:
    options = step_options(ToolResult, 3)
    assert options.max_attempts == 3
    assert step_options(ToolResult).max_attempts is None
    assert isinstance(options.serde, MsgspecJsonSerde)
