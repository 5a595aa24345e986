"""The model step: what the agent asks of the execution plane and what comes back."""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.chat import ChatMessage, ToolDefinition


class ModelRequest(msgspec.Struct, frozen=True):
    model: str
    messages: tuple[ChatMessage, ...]
    """The whole prompt: the system message first, then the conversation."""
    tools: tuple[ToolDefinition, ...] = ()
    max_tokens: int = 256
    call_key: str = ""
    """Agent, turn and round: names the call in logs and metrics."""
    agent: str = ""
    turn: int = 0
    round: int = 0


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from the prompt cache instead of being evaluated again."""


FinishReason = Literal["stop", "length", "tool_calls", "cancelled"]


class ModelReply(msgspec.Struct, frozen=True):
    message: ChatMessage
    usage: Usage = Usage()
    finish_reason: FinishReason = "stop"
    window: int = 0
    """The model's context window in tokens (prompt and reply), when its executor knows it;
    0 when it does not."""
    started: float = 0
    finished: float = 0
    """Unix seconds the step began and ended, taken inside the journaled step (so a replay
    gives the same): the times of the events around it."""
