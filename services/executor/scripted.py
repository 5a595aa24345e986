"""Fake models that ship with the code, for tests and demos without a real model.

`follow_directives` is the function behind the `script` model: the latest user message
is a script of JSON lines, and the model performs the line whose turn has come (one line
per round):

    {"calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}
    {"reply": "The answer is {results}"}

`{results}` in a reply is replaced by the tool results of the turn so far, one per line;
`{system}` by the prompt's system message (the instructions and what follows them).
`{"sleep": seconds}` before `calls` or `reply` makes that round slow (and stoppable).
A user message that is not a script is answered with `You said: <message>`.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import msgspec

from schemas.chat import ChatMessage, ToolCall
from schemas.model import ModelReply, ModelRequest, Usage
from services.executor.protocol import TextSink, discard


class ScriptedCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    arguments: dict[str, Any] = {}
    id: str = ""


class Directive(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    calls: tuple[ScriptedCall, ...] = ()
    reply: str | None = None
    sleep: float = 0.0


def follow_directives(request: ModelRequest, stop: threading.Event | None = None) -> ModelReply:
    start = _last_user_index(request.messages)
    script = _parse_script(request.messages[start].content) if start >= 0 else None
    if script is None:
        text = request.messages[start].content if start >= 0 else ""
        return _reply(f"You said: {text}", request)
    turn = request.messages[start + 1 :]
    step = sum(1 for message in turn if message.role == "assistant")
    if step >= len(script):
        return _reply("(the script has no more lines)", request)
    directive = script[step]
    if directive.sleep and stop is not None and stop.wait(directive.sleep):
        return ModelReply(ChatMessage(role="assistant", content=""), finish_reason="cancelled")
    if directive.calls:
        calls = tuple(
            ToolCall(id=call.id or f"call_{index}", name=call.name, arguments=call.arguments)
            for index, call in enumerate(directive.calls)
        )
        message = ChatMessage(role="assistant", content="", tool_calls=calls)
        return ModelReply(message, _usage(request, 1), finish_reason="tool_calls")
    results = "\n".join(m.content for m in turn if m.role == "tool")
    system = next((m.content for m in request.messages if m.role == "system"), "")
    reply = (directive.reply or "").replace("{results}", results).replace("{system}", system)
    return _reply(reply, request)


def _last_user_index(messages: tuple[ChatMessage, ...]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return -1


def _parse_script(text: str) -> list[Directive] | None:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not all(line.lstrip().startswith("{") for line in lines):
        return None
    try:
        return [msgspec.json.decode(line, type=Directive) for line in lines]
    except msgspec.DecodeError:
        return None


def _reply(text: str, request: ModelRequest) -> ModelReply:
    message = ChatMessage(role="assistant", content=text)
    return ModelReply(message, _usage(request, len(text.split())))


def _usage(request: ModelRequest, completion: int) -> Usage:
    prompt = sum(len(m.content.split()) for m in request.messages)
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def script(*lines: dict[str, Any]) -> str:
    """Write a script for the `script` model, one directive per line."""
    return "\n".join(msgspec.json.encode(line).decode() for line in lines)


class DirectiveExecutor:
    """The `script` model."""

    def generate(
        self, request: ModelRequest, stop: threading.Event, on_text: TextSink = discard
    ) -> ModelReply:
        reply = follow_directives(request, stop)
        for word in re.split(r"(?<= )", reply.message.content):
            if word:
                on_text(word)
        return reply
