"""The chat-completions wire format: request bodies and streamed replies put together."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from schemas.chat import ChatMessage, ToolCall, ToolDefinition
from schemas.model import ModelRequest
from services.executor.chat_api import (
    ModelError,
    StreamedReply,
    error_message,
    request_body,
    sse_data,
)

ADD = ToolDefinition("add", "Add two numbers.", {"type": "object", "properties": {}})
ECHO = ToolDefinition("echo", "Say it back.")
REQUEST = ModelRequest(
    model="remote",
    messages=(
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="1+2?"),
        ChatMessage(
            role="assistant", content="", tool_calls=(ToolCall("call_0", "add", {"a": 1}),)
        ),
        ChatMessage(role="tool", content="3", tool_call_id="call_0", name="add"),
    ),
    tools=(ECHO, ADD),
    max_tokens=64,
)


def chunk(content: str = "", finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": content, **delta}, "finish_reason": finish}]}


def test_the_request_body_speaks_the_native_format() -> None:
    body = request_body("qwen-7b", REQUEST, 32)

    assert body["model"] == "qwen-7b"
    assert body["max_tokens"] == 32
    assert body["stream"] is True
    assert [tool["function"]["name"] for tool in body["tools"]] == ["add", "echo"]
    assistant, tool = body["messages"][2], body["messages"][3]
    assert assistant["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    ]
    assert (tool["role"], tool["tool_call_id"], tool["name"]) == ("tool", "call_0", "add")


def test_a_request_without_tools_offers_none() -> None:
    body = request_body("m", ModelRequest(model="m", messages=REQUEST.messages[:2]), 8)
    assert "tools" not in body
    assert "tool_choice" not in body


def test_streamed_text_and_usage_make_the_reply() -> None:
    reply = StreamedReply("remote")
    shown = [reply.add(chunk("Hel")), reply.add(chunk("lo.", finish="stop"))]
    reply.add(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 40,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 32},
            },
        }
    )

    result = reply.reply(REQUEST)
    assert shown == ["Hel", "lo."]
    assert result.message.content == "Hello."
    assert result.finish_reason == "stop"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 3)
    assert result.usage.cached_tokens == 32


def test_tool_calls_are_assembled_from_their_pieces() -> None:
    reply = StreamedReply("remote")
    first = {"index": 0, "id": "abc", "function": {"name": "add", "arguments": '{"a": '}}
    rest = {"index": 0, "function": {"arguments": "2}"}}
    reply.add(chunk(tool_calls=[first]))
    reply.add(chunk(tool_calls=[rest], finish="tool_calls"))

    result = reply.reply(REQUEST)
    assert result.finish_reason == "tool_calls"
    assert result.message.tool_calls == (ToolCall("abc", "add", {"a": 2}),)


def test_a_tool_call_without_an_id_gets_one_counted_from_the_conversation() -> None:
    reply = StreamedReply("remote")
    reply.add(chunk(tool_calls=[{"index": 0, "function": {"name": "echo", "arguments": "{}"}}]))
    assert reply.reply(REQUEST).message.tool_calls[0].id == "call_1"


def test_tool_call_arguments_that_are_not_json_are_a_model_error() -> None:
    reply = StreamedReply("remote")
    reply.add(chunk(tool_calls=[{"index": 0, "function": {"name": "add", "arguments": "{a"}}]))
    with pytest.raises(ModelError, match="cannot be parsed"):
        reply.reply(REQUEST)


def test_an_error_in_the_stream_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="overloaded"):
        StreamedReply("remote").add({"error": {"message": "overloaded"}})


def test_llama_cpp_servers_cache_count_is_read_too() -> None:
    reply = StreamedReply("remote")
    reply.add({"choices": [], "usage": {"prompt_tokens": 9, "cache_n": 7}})
    assert reply.reply(REQUEST).usage.cached_tokens == 7


def test_sse_lines_and_error_bodies() -> None:
    assert sse_data('data: {"a": 1}') == '{"a": 1}'
    assert sse_data(": keepalive") is None
    assert error_message(b'{"error": {"message": "bad model"}}') == "bad model"
    assert error_message(b"<html>\n  Bad Gateway\n</html>") == "<html> Bad Gateway </html>"
    assert error_message(b"") == "(no message)"


def test_withheld_tools_are_left_out_and_with_none_left_none_may_be_called() -> None:
    some = request_body("m", msgspec.structs.replace(REQUEST, withheld=("echo",)), 8)
    assert [tool["function"]["name"] for tool in some["tools"]] == ["add"]
    assert some["tool_choice"] == "auto"
    every = request_body("m", msgspec.structs.replace(REQUEST, withheld=("add", "echo")), 8)
    assert [tool["function"]["name"] for tool in every["tools"]] == ["add", "echo"]
    assert every["tool_choice"] == "none"


def test_an_mcp_tool_goes_by_a_name_servers_accept_and_comes_back_by_its_own() -> None:
    clock = ToolDefinition("mcp:time/get_current_time", "The time.")
    asked = ToolCall("call_0", "mcp:time/get_current_time", {})
    request = msgspec.structs.replace(
        REQUEST,
        messages=(
            *REQUEST.messages[:2],
            ChatMessage(role="assistant", content="", tool_calls=(asked,)),
        ),
        tools=(clock, ADD),
    )
    body = request_body("m", request, 8)
    assert [t["function"]["name"] for t in body["tools"]] == ["add", "mcp_time__get_current_time"]
    assert body["messages"][2]["tool_calls"][0]["function"]["name"] == "mcp_time__get_current_time"
    reply = StreamedReply("remote")
    piece = {
        "index": 0,
        "id": "x",
        "function": {"name": "mcp_time__get_current_time", "arguments": "{}"},
    }
    reply.add(chunk(tool_calls=[piece], finish="tool_calls"))
    assert reply.reply(request).message.tool_calls == (
        ToolCall("x", "mcp:time/get_current_time", {}),
    )
