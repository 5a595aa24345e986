"""The memory tools: `remember` keeps a record, `search_memory` finds records. The scope
is the server's: the calling agent's own (`agent`, from its address), the end user's
(`user`, from the message that started the turn) or its tenant's (`tenant`), never from
what the model writes. In a turn an end user started, `remember` keeps to the user's scope
unless asked for the agent's, and is refused the tenant's unless the spec allows it, so
what one user tells a model never reaches the prompts of the tenant's other users."""

from __future__ import annotations

from collections.abc import Callable
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
from services.projection.searching import Where, search_memories
from services.tools.base import FunctionTool, ToolContext, ToolError

REMEMBER, SEARCH_MEMORY = "remember", "search_memory"
MEMORY_TOOL_NAMES = (REMEMBER, SEARCH_MEMORY)
SHOWN = 5
"""Records one search returns at most."""
Remember = Callable[[MemoryNote], MemoryAnswer]

REMEMBER_DEFINITION = ToolDefinition(
    name=REMEMBER,
    description=(
        "Keep a short note for later conversations: by default for the person you are "
        "talking to (or, when none is signed in, for this agent only); `agent` for this "
        "agent only, `tenant` for every agent of the organisation."
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
    description=(
        "Find notes kept earlier (this agent's, the person's you are talking to and the "
        "organisation's) by words."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for."}},
        "required": ["query"],
    },
)


TENANT_REFUSED = (
    "remember cannot keep tenant-wide notes in a conversation with a signed-in user: what "
    "one user says is kept for that user only (the spec's memory.tenant_writes allows it)."
)


def scopes(agent: str, user: str = "") -> tuple[MemoryScope, ...]:
    """The scopes a turn of `agent` may read: its own, the end user's when a user's
    message started the turn, and its tenant's."""
    tenant = tenant_of(agent)
    own = MemoryScope(tenant, "agent", agent)
    mine = (MemoryScope(tenant, "user", user),) if user else ()
    return own, *mine, MemoryScope(tenant, "tenant")


def written_scope(scope: object, context: ToolContext) -> MemoryScope:
    """Where a `remember` call keeps its note: the turn's end user's scope by default
    (without one, the agent's), the agent's or the tenant's when asked and allowed."""
    tenant = tenant_of(context.agent)
    if scope == "tenant":
        if not context.tenant_writes:
            raise ToolError(TENANT_REFUSED)
        return MemoryScope(tenant, "tenant")
    if scope == "agent":
        return MemoryScope(tenant, "agent", context.agent)
    return own_scope(context.agent, context.user)


def own_scope(agent: str, user: str = "") -> MemoryScope:
    """Where a turn keeps what it learns by default: its end user's scope when a user's
    message started it, else the agent's own."""
    tenant = tenant_of(agent)
    return MemoryScope(tenant, "user", user) if user else MemoryScope(tenant, "agent", agent)


def remember_tool(send: Remember) -> FunctionTool:
    def remember(arguments: dict[str, Any], context: ToolContext) -> str:
        text, scope, kind = (arguments.get(k) for k in ("text", "scope", "kind"))
        if not isinstance(text, str) or not text.strip():
            raise ToolError("remember needs `text`, what to remember.")
        if len(text) > MAX_MEMORY_CHARS:
            raise ToolError(f"remember keeps at most {MAX_MEMORY_CHARS} characters.")
        chosen = written_scope(scope, context)
        answer = send(MemoryNote(chosen, "semantic" if kind == "semantic" else "episodic", text))
        if answer.record is None:
            raise ToolError(answer.problem)
        return canonical({"remembered": answer.record.id, "scope": chosen.kind})

    return FunctionTool(REMEMBER_DEFINITION, remember, effects=True)


def search_tool(projection: Where) -> FunctionTool:
    def search(arguments: dict[str, Any], context: ToolContext) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("search_memory needs `query`, words to look for.")
        found = search_memories(
            projection, MemorySearch(query, scopes(context.agent, context.user), SHOWN)
        )
        notes = [{"id": h.record.id, "text": h.record.text} for h in found]
        return canonical({"memories": notes})

    return FunctionTool(SEARCH_DEFINITION, search)
