"""What a tool is, and what it is given when it runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from schemas.chat import ToolDefinition

UNKNOWN_OUTCOME = (
    "The process running this tool stopped before the tool finished, so it may or may not "
    "have taken effect. It was not run again."
)
"""What the model reads of a side-effecting call whose step was interrupted after it began:
the effect ledger holds its start and no result."""
RESULT_LIMIT = 16_000
"""Characters of a tool's result that are kept (in the journal, on the timeline, for the
model); past it the result is cut, with a marker saying how much was cut."""


def capped(content: str) -> str:
    if len(content) <= RESULT_LIMIT:
        return content
    cut = len(content) - RESULT_LIMIT
    return (
        f"{content[:RESULT_LIMIT]}\n[... {cut} more characters cut: a tool result is kept up "
        f"to {RESULT_LIMIT} characters ...]"
    )


@dataclass(frozen=True)
class ToolContext:
    agent: str
    idempotency_key: str
    """Agent, turn, round and call id. A side effect keyed by it must happen at most once."""
    home: Path
    """The data directory; a tool keeps its files below it."""
    user: str = ""
    """The end user whose message started the turn; empty for a tenant-wide key's."""
    tenant_writes: bool = True
    """Whether the turn may write tenant-wide memory: always without an end user, with one
    only when its spec says so (`memory.tenant_writes`)."""


class Tool(Protocol):
    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def effects(self) -> bool:
        """True when calling the tool changes something outside the agent.

        Such a call runs at most once per idempotency key: if the process dies while it
        runs, it is not run again and the model is told that its outcome is unknown.
        """
        ...

    def call(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Run the tool; raise `ToolError` (or any exception) to report a failure."""
        ...


class ToolError(Exception):
    """A failure the tool explains in a sentence meant for the model."""


@dataclass(frozen=True)
class FunctionTool:
    """A tool made of a plain function."""

    definition: ToolDefinition
    function: Callable[[dict[str, Any], ToolContext], str] = field(repr=False)
    effects: bool = False

    def call(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return self.function(arguments, context)
