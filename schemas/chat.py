"""The conversation as the model sees it: messages, tool calls and tool definitions."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}

Role = Literal["system", "user", "assistant", "tool"]

_CANONICAL = msgspec.json.Encoder(order="sorted")


def canonical(value: object) -> str:
    """Compact JSON with sorted keys: the same value always gives the same text. Prompts
    show tool definitions and calls in it, so their bytes (and the prompt cache) hold."""
    return _CANONICAL.encode(value).decode()


class ToolCall(msgspec.Struct, frozen=True):
    """One call the model asked for. `id` is unique within the turn."""

    id: str
    name: str
    arguments: dict[str, Any] = {}


class ChatMessage(msgspec.Struct, frozen=True):
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """On a `tool` message: the call it answers."""
    name: str | None = None
    """On a `tool` message: the tool that answered."""


class ToolDefinition(msgspec.Struct, frozen=True):
    """What the model is shown of a tool: its name, what it does and its JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any] = msgspec.field(default_factory=lambda: dict(NO_PARAMETERS))
