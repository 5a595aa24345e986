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
    fallback: tuple[str, ...] = ()
    """Models to try in order when `model` fails; the round starts again on each."""
    local_only: bool = False
    """Never run on a model tagged `external`, not even as a fallback."""
    withheld: tuple[str, ...] = ()
    """Tools shown in `tools` that the model may not call in this request: the tools
    stay in the prompt (its prefix, and the prompt cache, stay the same) but the reply
    must be an answer or a call of another tool."""

    def callable_tools(self) -> tuple[ToolDefinition, ...]:
        return tuple(tool for tool in self.tools if tool.name not in self.withheld)


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from the prompt cache instead of being evaluated again."""


FinishReason = Literal["stop", "length", "tool_calls", "cancelled"]


class Timing(msgspec.Struct, frozen=True):
    """How long one model call took, measured on the execution plane."""

    queue_seconds: float = 0.0
    """Waiting for the model behind other agents' calls."""
    first_token_seconds: float = 0.0
    """From the start of the call (after the queue) to the first generated token."""
    tokens_per_second: float = 0.0
    """Completion tokens per second of generation, after the first token."""


class Fallback(msgspec.Struct, frozen=True):
    """A model of the chain failed and the round started again on the next one."""

    model: str
    next: str
    reason: str
    """One sentence: what went wrong with `model`."""


class ModelReply(msgspec.Struct, frozen=True):
    message: ChatMessage
    usage: Usage = Usage()
    finish_reason: FinishReason = "stop"
    model: str = ""
    """The model that wrote the reply (the request's, or a fallback)."""
    timing: Timing = Timing()
    fallbacks: tuple[Fallback, ...] = ()
    """Models of the chain that failed before `model` answered, in order."""
    window: int = 0
    """The model's context window in tokens (prompt and reply), when its executor knows it;
    0 when it does not."""
    started: float = 0
    finished: float = 0
    """Unix seconds the step began and ended, taken inside the journaled step (so a replay
    gives the same): the times of the events around it."""
