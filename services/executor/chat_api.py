"""The chat-completions wire format, without I/O: the request body, and a streamed reply
put back together (text, native tool calls, usage).

Spoken by llama.cpp's server, vLLM, Ollama and hosted APIs alike; where they differ (how
cached prompt tokens are reported), every known spelling is read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from schemas.chat import ChatMessage, ToolCall, ToolDefinition
from schemas.model import FinishReason, ModelReply, ModelRequest, Usage


class ModelError(Exception):
    """One model failed this call (an HTTP error, a timeout, a server gone, output that
    cannot be parsed). The message is one sentence; the next model of a chain may take
    over."""


def request_body(
    model_id: str, request: ModelRequest, max_tokens: int, *, stream: bool = True
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model_id,
        "messages": [_message(message) for message in request.messages],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        # Withheld tools are left out; with none left the tools stay, not to be called.
        offered = request.callable_tools() or request.tools
        body["tools"] = [_tool(tool) for tool in sorted(offered, key=lambda t: t.name)]
        body["tool_choice"] = "auto" if request.callable_tools() else "none"
    return body


def wire_name(name: str) -> str:
    """A tool's name as OpenAI-compatible servers accept it (letters, digits, `_` and `-`):
    an MCP tool's `mcp:SERVER/TOOL` goes as `mcp_SERVER__TOOL`. A reply's name is mapped
    back through the request's tools (`_tool_call`)."""
    return _NOT_WIRE.sub("_", name.replace("/", "__"))


_NOT_WIRE = re.compile(r"[^A-Za-z0-9_-]")


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    function = {
        "name": wire_name(tool.name),
        "description": tool.description,
        "parameters": tool.parameters,
    }
    return {"type": "function", "function": function}


def _message(message: ChatMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": wire_name(call.name),
                    "arguments": json.dumps(call.arguments),
                },
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
        if message.name:
            wire["name"] = message.name
    return wire


def sse_data(line: str) -> str | None:
    """The payload of one server-sent-events line, or None for other lines."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class StreamedReply:
    """A reply assembled from `chat.completion.chunk`s, in the order they arrive."""

    model: str
    text: str = ""
    finish: str = ""
    chunks: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    calls: dict[int, _PartialCall] = field(default_factory=dict)

    def add(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; return the text it adds to the reply ('' for none)."""
        if isinstance(chunk.get("error"), dict | str):
            raise ModelError(
                f"The model {self.model!r} reported an error mid-reply: {_said(chunk)}"
            )
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta") or {}
        for piece in delta.get("tool_calls") or []:
            self._call_piece(piece)
        content = delta.get("content") or ""
        if content or delta.get("tool_calls"):
            self.chunks += 1
        self.text += content
        return str(content)

    def add_whole(self, body: dict[str, Any]) -> str:
        """Take a reply that was not streamed (a `chat.completion`); return its text."""
        choices = body.get("choices") or [{}]
        message = choices[0].get("message") or {}
        delta = {"content": message.get("content"), "tool_calls": message.get("tool_calls")}
        for index, call in enumerate(delta["tool_calls"] or []):
            call.setdefault("index", index)
        chunk = {"choices": [{"delta": delta, "finish_reason": choices[0].get("finish_reason")}]}
        return self.add({**chunk, "usage": body.get("usage")})

    def _call_piece(self, piece: dict[str, Any]) -> None:
        call = self.calls.setdefault(int(piece.get("index", len(self.calls))), _PartialCall())
        call.id = piece.get("id") or call.id
        function = piece.get("function") or {}
        # Servers send the name once (OpenAI) or again with every piece (llama-cpp-python).
        call.name = call.name or function.get("name") or ""
        call.arguments += function.get("arguments") or ""

    def reply(self, request: ModelRequest) -> ModelReply:
        calls = tuple(
            self._tool_call(request, n, call) for n, call in enumerate(self.calls.values())
        )
        finish: FinishReason = "tool_calls" if calls else _finish(self.finish)
        message = ChatMessage(role="assistant", content=self.text.strip(), tool_calls=calls)
        return ModelReply(message=message, usage=self._usage(), finish_reason=finish)

    def _tool_call(self, request: ModelRequest, n: int, call: _PartialCall) -> ToolCall:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict) or not call.name:
            raise ModelError(
                f"The model {self.model!r} wrote a tool call that cannot be parsed "
                f"(tool {call.name or '(no name)'!r}, arguments {call.arguments[:80]!r})."
            )
        seen = sum(len(message.tool_calls) for message in request.messages)
        named = {wire_name(tool.name): tool.name for tool in request.tools}
        name = named.get(call.name, call.name)
        return ToolCall(id=call.id or f"call_{seen + n}", name=name, arguments=arguments)

    def _usage(self) -> Usage:
        usage = self.usage
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") or usage.get("cache_n") or 0
        return Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or self.chunks),
            cached_tokens=int(cached),
        )


def _finish(reason: str) -> FinishReason:
    if reason == "length":
        return "length"
    return "stop"


def _said(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error
    return str(error if error is not None else body.get("detail") or body)[:300]


def error_message(body: bytes) -> str:
    """What a server said in an error response, shortened to one line."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    text = _said(parsed) if isinstance(parsed, dict) else body.decode(errors="replace")
    return " ".join(text.split())[:300] or "(no message)"
