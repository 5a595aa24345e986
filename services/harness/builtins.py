"""Tools the harness itself implements: spawning children and waiting for them."""

from __future__ import annotations

from schemas.chat import ToolDefinition

SPAWN = "spawn_agent"
WAIT = "wait"

SPAWN_DEFINITION = ToolDefinition(
    name=SPAWN,
    description=(
        "Start a helper agent on a task. Returns the helper's address at once; "
        "its reply arrives later. Call `wait` to pause until every helper has replied."
    ),
    parameters={
        "type": "object",
        "properties": {"task": {"type": "string", "description": "What the helper should do."}},
        "required": ["task"],
    },
)

WAIT_DEFINITION = ToolDefinition(
    name=WAIT,
    description="Pause until every helper you started has replied.",
)

BUILTIN_DEFINITIONS = (SPAWN_DEFINITION, WAIT_DEFINITION)
