"""What a tool asks a person mid-call (an MCP server's "input required" result), and
whether a person's answers fit it.

A question is a form (a flat JSON Schema object of strings, numbers, integers, booleans
and enums, as MCP's elicitation allows) or a page to open (url mode: the answer is only
approve or deny). Pure: the gateway checks answers with it before it sends them, and the
agent checks them again when they arrive.
"""

from __future__ import annotations

from typing import Any

import msgspec

MAX_ASKED = 64 * 1024
"""The most a call's questions (and an MCP server's request state) may take, encoded: they
are journaled and held in the agent's state while the turn waits."""

KINDS: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


class Question(msgspec.Struct, frozen=True):
    message: str
    """What the server says to the person."""
    schema: dict[str, Any] = {}
    """A form's JSON Schema: the answer is an object of its properties."""
    url: str = ""
    """A page for the person to open (url mode); no answer object is sent."""


class InputAsked(msgspec.Struct, frozen=True):
    """A call that needs a person's input before it can finish."""

    questions: dict[str, Question]
    """Keyed as the server keyed its input requests; each key is answered."""
    state: str | None = None
    """The server's request state, sent back exactly as it came with the answers; None
    when the server gave none (then none is sent)."""
    leg: int = 1
    """How many times this call has asked: each answer sends it again, and a server may
    ask once more."""


class InputAnswer(msgspec.Struct, frozen=True):
    """A person's answer to an `InputAsked`: the call is sent again with it."""

    asked: InputAsked
    accept: bool
    """False: the person declined; the server is told so and decides what follows."""
    answers: dict[str, dict[str, Any]] = {}
    """Per question key, the form's values (nothing for a url question)."""


def answer_problem(questions: dict[str, Question], answers: dict[str, dict[str, Any]]) -> str:
    """One sentence saying what is wrong with accepting `questions` with `answers`; ''
    when they fit."""
    unknown = sorted(set(answers) - set(questions))
    if unknown:
        return (
            f"There is no question {unknown[0]!r} to answer; the questions are {_keys(questions)}."
        )
    for key, question in sorted(questions.items()):
        if question.url:
            continue
        problem = _form_problem(question.schema, answers.get(key))
        if problem:
            return f"The answer to {key!r} {problem}"
    return ""


def _form_problem(schema: dict[str, Any], values: dict[str, Any] | None) -> str:
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [name for name in schema.get("required") or () if name in properties]
    if values is None:
        return f"is missing: it needs {_fields(required or list(properties))}." if required else ""
    missing = [name for name in required if name not in values]
    if missing:
        return f"is missing {_fields(missing)}."
    for name, value in values.items():
        prop = properties.get(name)
        if not isinstance(prop, dict):
            asks = _fields(list(properties))
            return f"names {name!r}, which the question does not ask; it asks {asks}."
        problem = _value_problem(prop, value)
        if problem:
            return f"gives {name!r} {problem}"
    return ""


def _value_problem(prop: dict[str, Any], value: Any) -> str:
    choices = prop.get("enum")
    if isinstance(choices, list) and value not in choices:
        return f"a value it does not offer; it takes one of {', '.join(map(repr, choices))}."
    kind = prop.get("type")
    accepted = KINDS.get(kind) if isinstance(kind, str) else None
    wrong_bool = isinstance(value, bool) and kind != "boolean"
    if accepted is not None and (wrong_bool or not isinstance(value, accepted)):
        return f"{_shown(value)}, which is not {_article(kind)}."
    return ""


def defaults_of(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The form filled with its own defaults, when every field has one; else None."""
    properties: dict[str, Any] = schema.get("properties") or {}
    if not all(isinstance(p, dict) and "default" in p for p in properties.values()):
        return None
    return {name: prop["default"] for name, prop in properties.items()}


def _keys(questions: dict[str, Question]) -> str:
    return ", ".join(repr(key) for key in sorted(questions)) or "none"


def _fields(names: list[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _article(kind: str | None) -> str:
    return f"an {kind}" if kind and kind[0] in "aeiou" else f"a {kind}"


def _shown(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."
