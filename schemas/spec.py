"""Agent specs: what an agent is told, which model it runs on and what it may use."""

from __future__ import annotations

import msgspec


class Limits(msgspec.Struct, frozen=True):
    max_rounds: int = 8
    """Rounds (model call plus its tool calls) one turn may run before it fails."""
    max_tokens: int = 256
    """Completion tokens one model call may produce."""
    max_children: int = 8
    """Children one turn may spawn."""
    max_depth: int = 3
    """How deep a chain of spawned children may go."""


class AgentSpec(msgspec.Struct, frozen=True):
    kind: str
    instructions: str
    model: str = "smollm2"
    tools: tuple[str, ...] = ()
    """Names of the tools the agent is granted, besides the built-in `spawn_agent` and `wait`
    when `can_spawn` is set."""
    can_spawn: bool = False
    limits: Limits = Limits()
    version: int = 0
    """0 for an ad-hoc spec; published versions count from 1 per kind."""
