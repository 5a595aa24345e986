"""The input of a kind's MCP tool: `message` by default, or the JSON schema the kind's spec
declares as its `input`, whose arguments are checked and sent to the agent as its message,
as JSON. Either way the tool also takes `agent` and `idempotency_key`."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from schemas.spec import RESERVED_INPUT, AgentSpec
from services.gateway.models import MAX_TEXT

AGENT = {
    "type": "string",
    "description": "The address of an agent to continue its conversation "
    "(the `agent` of an earlier result); without it a new agent is made.",
}
IDEMPOTENCY_KEY = {
    "type": "string",
    "description": "A key of your own for this call (1 to 120 characters): a call "
    "sent again with the same key and input is the same message and the same "
    "turn, never a second one.",
}
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The message to the agent."},
        "agent": AGENT,
        "idempotency_key": IDEMPOTENCY_KEY,
    },
    "required": ["message"],
}


def tool_schema(spec: AgentSpec) -> dict[str, Any]:
    """The tool's `inputSchema`: the spec's input with `agent` and `idempotency_key` added
    to its properties, or the message schema."""
    if not spec.input:
        return MESSAGE_SCHEMA
    properties = {**spec.input.get("properties", {}), "agent": AGENT}
    properties["idempotency_key"] = IDEMPOTENCY_KEY
    return {**spec.input, "properties": properties}


def message_of(spec: AgentSpec | None, arguments: dict[str, Any]) -> object:
    """The text to send for a call's arguments: `message` for a kind without an input
    schema, else the other arguments as JSON once they match the schema; `InputError`
    with a sentence when they do not."""
    if spec is None or not spec.input:
        return _message(arguments.get("message"), "message" in arguments)
    given = {k: v for k, v in arguments.items() if k not in RESERVED_INPUT}
    error = best_match(Draft202012Validator(spec.input).iter_errors(given))
    if error is not None:
        raise InputError(_sentence(spec.kind, error))
    return json.dumps(given, ensure_ascii=False, sort_keys=True)


def _message(given: object, present: bool) -> str:
    if not present:
        raise InputError(
            "message: the tool takes `message`, the text to send to the agent; this call has none."
        )
    if not isinstance(given, str):
        shown = "null" if given is None else type(given).__name__
        raise InputError(f"message: expected the text to send to the agent, a string; got {shown}.")
    if not given:
        raise InputError(
            "message: the text to send to the agent is empty; send at least a character."
        )
    if len(given) > MAX_TEXT:
        raise InputError(
            f"message: {len(given)} characters; the most a message to an agent takes is {MAX_TEXT}."
        )
    return given


class InputError(ValueError):
    """Arguments that do not match a kind's input schema."""


def _sentence(kind: str, error: ValidationError) -> str:
    where = "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.path)
    field = f"arguments{where}"
    if error.validator == "required":
        wanted: Any = error.validator_value
        given: Any = error.instance
        missing = [name for name in wanted if name not in given]
        return f"{field}: {', '.join(missing)} required by the input schema of {kind}."
    shown = json.dumps(error.instance, ensure_ascii=False)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    rule = json.dumps({error.validator: error.validator_value}, ensure_ascii=False)
    return f"{field}: {shown} does not meet the rule {rule} of the input schema of {kind}."
