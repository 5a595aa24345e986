"""The client the MCP conformance suite runs in client mode: teaspill's own MCP client, as
an agent's turn uses it, against the suite's server for one scenario.

Run: `python -m tests.conformance.probe SERVER_URL` (the suite appends the URL and names
the scenario in `MCP_CONFORMANCE_SCENARIO`). The probe takes the catalog a turn would take
(`McpHub.catalog`, every tool of the server granted) and then makes the calls a model
would, each through `McpHub.run`: the calls the scenario's context names
(`MCP_CONFORMANCE_CONTEXT`'s `toolCalls`), else one call of each listed tool with
arguments made from its schema. One scenario asks the model to echo what it was shown of
a tool's schema: it gets the schema exactly as the catalog holds it. A call that asks for
a person's input (an input-required result) is answered as a person would answer it
through teaspill: each form filled in, the answers checked as the agent checks them, and
the call sent again with them (`McpHub.run` with the answer, as the driver does once the
answer arrives).

Each result is printed as a JSON line; the exit status is 1 when the catalog could not be
taken.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import msgspec

from schemas.chat import ToolCall
from schemas.mcp import McpCatalog, McpTool
from schemas.questions import InputAnswer, InputAsked, answer_problem
from services.effects.ledger import MemoryLedger
from services.mcp.config import Server
from services.mcp.hub import McpHub

SERVER = "suite"
DEADLINE = 20.0
ECHOED = ("json_schema_echo", "json_schema_2020_12_tool")
"""The preservation scenario's echo tool, and the tool whose schema it is given."""

SAMPLES: dict[str, Any] = {
    "number": 2,
    "integer": 3,
    "string": "teaspill",
    "boolean": True,
    "object": {},
    "array": [],
}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """A value of the schema's type for each property it names, as a model would fill in."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    found: dict[str, Any] = {}
    for name, prop in properties.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if isinstance(kind, str) and kind in SAMPLES:
            found[name] = SAMPLES[kind]
    return found


def planned_calls(
    catalog: McpCatalog, context: dict[str, Any]
) -> list[tuple[McpTool, dict[str, Any]]]:
    """The calls to make: the context's, else one of each tool (the echo tool gets the
    schema the catalog shows of the tool it echoes)."""
    named = context.get("toolCalls")
    if isinstance(named, list):
        return [
            (tool, dict(call.get("arguments") or {}))
            for call in named
            if (tool := catalog.find(f"mcp:{SERVER}/{call.get('name')}")) is not None
        ]
    echo, echoed = (catalog.find(f"mcp:{SERVER}/{name}") for name in ECHOED)
    if echo is not None and echoed is not None:
        return [(echo, {"schema": echoed.definition.parameters})]
    return [(tool, arguments_for(tool.definition.parameters)) for tool in catalog.tools]


def main(url: str) -> int:
    hub = McpHub({SERVER: Server(SERVER, url=url)}, MemoryLedger(), DEADLINE)
    catalog = hub.catalog("conformance", (f"mcp:{SERVER}/*",))
    for problem in catalog.problems:
        sys.stderr.write(problem + "\n")
    if catalog.problems:
        return 1
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    for index, (tool, arguments) in enumerate(planned_calls(catalog, context)):
        call = ToolCall(f"call-{index}", tool.definition.name, arguments)
        result = hub.run(call, f"conformance-{index}", tool)
        while result.asked is not None:
            result = hub.run(call, f"conformance-{index}", tool, answered(result.asked))
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


def answered(asked: InputAsked) -> InputAnswer:
    """What a person would answer: each form filled in, as the agent checks answers."""
    answers = {
        key: arguments_for(question.schema)
        for key, question in asked.questions.items()
        if not question.url
    }
    problem = answer_problem(asked.questions, answers)
    if problem:
        raise SystemExit(problem)
    return InputAnswer(asked, accept=True, answers=answers)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
