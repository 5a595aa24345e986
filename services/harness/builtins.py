"""Tools the harness itself implements: spawning children, waiting for them, reading
back the original messages of earlier turns, and asking the person a question."""

from __future__ import annotations

from schemas.chat import ToolDefinition

SPAWN = "spawn_agent"
WAIT = "wait"
RECALL = "recall"
ASK_USER = "ask_user"

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

RECALL_DEFINITION = ToolDefinition(
    name=RECALL,
    description=(
        "Read the original messages of an earlier turn (summarized or cut in what you "
        "see): give its turn number, or a query to find the turns that mention it."
    ),
    parameters={
        "type": "object",
        "properties": {
            "turn": {"type": "integer", "description": "The turn's number."},
            "query": {"type": "string", "description": "Words to look for instead."},
            "message": {"type": "integer", "description": "Only this message of the turn."},
            "offset": {"type": "integer", "description": "Start this far into the message."},
        },
    },
)

ASK_USER_DEFINITION = ToolDefinition(
    name=ASK_USER,
    description=(
        "Ask the person a question and wait for the answer, which is this call's result. "
        "Give `choices` to let them pick one, or a `form` (a JSON Schema object of "
        "string, number, integer and boolean fields) to ask for several values."
    ),
    parameters={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "What to ask the person."},
            "choices": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The answers the person may pick from.",
            },
            "form": {
                "type": "object",
                "description": "A JSON Schema object of the values to ask for.",
            },
        },
        "required": ["question"],
    },
)

BUILTIN_DEFINITIONS = (SPAWN_DEFINITION, WAIT_DEFINITION, RECALL_DEFINITION, ASK_USER_DEFINITION)
