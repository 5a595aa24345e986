"""The memory tools: `remember` keeps a record, `search_memory` finds records. The scope
is the server's: the calling agent's own (`agent`) or its tenant's (`tenant`), both taken
from the agent's address, never from what the model writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from schemas.address import tenant_of
from schemas.chat import ToolDefinition, canonical
from schemas.memory import (
    MAX_MEMORY_CHARS,
    MemoryAnswer,
    MemoryKind,
    MemoryNote,
    MemoryScope,
    MemorySearch,
)
from services.projection.memories import search_now
from services.tools.base import FunctionTool, ToolContext, ToolError

REMEMBER, SEARCH_MEMORY = "remember", "search_memory"
MEMORY_TOOL_NAMES = (REMEMBER, SEARCH_MEMORY)
SHOWN = 5
"""Records one search returns at most."""
Remember = Callable[[MemoryNote], MemoryAnswer]

REMEMBER_DEFINITION = ToolDefinition(
    name=REMEMBER,
    description=(
        "Keep a short note for later conversations: `agent` (the default) for this agent "
        "only, `tenant` for every agent of the organisation."
    ),
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "What to remember, in one sentence."},
            "scope": {"type": "string", "enum": ["agent", "tenant"]},
            "kind": {"type": "string", "enum": list(get_args(MemoryKind))},
        },
        "required": ["text"],
    },
)
SEARCH_DEFINITION = ToolDefinition(
    name=SEARCH_MEMORY,
    description="Find notes kept earlier (this agent's and the organisation's) by words.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for."}},
        "required": ["query"],
    },
)


def scopes(agent: str) -> tuple[MemoryScope, MemoryScope]:
    tenant = tenant_of(agent)
    return MemoryScope(tenant, "agent", agent), MemoryScope(tenant, "tenant")


def remember_tool(send: Remember) -> FunctionTool:
    def remember(arguments: dict[str, Any], context: ToolContext) -> str:
        text, scope, kind = (arguments.get(k) for k in ("text", "scope", "kind"))
        if not isinstance(text, str) or not text.strip():
            raise ToolError("remember needs `text`, what to remember.")
        if len(text) > MAX_MEMORY_CHARS:
            raise ToolError(f"remember keeps at most {MAX_MEMORY_CHARS} characters.")
        own, tenant = scopes(context.agent)
        chosen = tenant if scope == "tenant" else own
        answer = send(MemoryNote(chosen, "semantic" if kind == "semantic" else "episodic", text))
        if answer.record is None:
            raise ToolError(answer.problem)
        return canonical({"remembered": answer.record.id, "scope": chosen.kind})

    return FunctionTool(REMEMBER_DEFINITION, remember, effects=True)


def search_tool(projection: Path) -> FunctionTool:
    def search(arguments: dict[str, Any], context: ToolContext) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("search_memory needs `query`, words to look for.")
        found = search_now(projection, MemorySearch(query, scopes(context.agent), SHOWN))
        notes = [{"id": h.record.id, "text": h.record.text} for h in found]
        return canonical({"memories": notes})

    return FunctionTool(SEARCH_DEFINITION, search)
