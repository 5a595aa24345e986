"""The built-in `ask_user` tool: the model asks the person a question, optionally with
choices or a form, and the turn waits for the answer as it waits for an approval.

The call's arguments become one question (`schemas.questions.Question`, keyed
`QUESTION`), which a person answers through the same route as any approval, checked
against its form with the same sentences; the answer is the call's result. Pure.
"""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.chat import ToolCall
from schemas.harness import PendingApproval
from schemas.questions import KINDS, MAX_ASKED, InputAsked, Question
from services.harness.builtins import ASK_USER

QUESTION = "question"
"""The key of the one question an `ask_user` call asks."""
ANSWER = "answer"
"""The field a question without a form is answered in."""
MAX_QUESTION = 2000
MAX_CHOICES = 20
MAX_FIELDS = 16
DECLINED = "The person declined to answer."


def asked_of(call: ToolCall) -> InputAsked | str:
    """What an `ask_user` call asks the person; the sentence the model reads when its
    arguments do not make a question."""
    arguments = call.arguments
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip():
        return "ask_user needs a non-empty string `question`."
    if len(question) > MAX_QUESTION:
        return f"ask_user takes a question of at most {MAX_QUESTION} characters."
    choices, form = arguments.get("choices"), arguments.get("form")
    if choices is not None and form is not None:
        return "ask_user takes `choices` or a `form`, not both."
    if form is not None:
        problem = form_problem(form)
        return problem or _asked(question, form)
    field: dict[str, Any] = {"type": "string"}
    if choices is not None:
        if not _strings(choices):
            return f"ask_user takes `choices` as a list of 1 to {MAX_CHOICES} strings."
        field["enum"] = list(choices)
    return _asked(question, {"type": "object", "properties": {ANSWER: field}, "required": [ANSWER]})


def _asked(question: str, schema: dict[str, Any]) -> InputAsked | str:
    asked = InputAsked({QUESTION: Question(question, schema)})
    size = len(msgspec.json.encode(asked))
    if size > MAX_ASKED:
        return (
            "ask_user takes a question and its choices or form of at most "
            f"{MAX_ASKED:,} bytes; this one is {size:,}."
        )
    return asked


def _strings(choices: object) -> bool:
    return (
        isinstance(choices, list)
        and 1 <= len(choices) <= MAX_CHOICES
        and all(isinstance(choice, str) and choice for choice in choices)
    )


def form_problem(form: object) -> str:
    """Why `form` is not a form a person can fill in ('' when it is): an object schema of
    at most `MAX_FIELDS` fields, each a string, number, integer or boolean, or an enum."""
    usage = (
        "ask_user takes `form` as a JSON Schema object whose `properties` are 1 to "
        f"{MAX_FIELDS} fields of type string, number, integer or boolean (or an `enum`)"
    )
    properties = form.get("properties") if isinstance(form, dict) else None
    if not isinstance(properties, dict) or not 1 <= len(properties) <= MAX_FIELDS:
        return f"{usage}."
    for name, field in properties.items():
        if not isinstance(field, dict):
            return f"{usage}; {name!r} is not one."
        kind, choices = field.get("type"), field.get("enum")
        typed = isinstance(kind, str) and kind in KINDS  # a list `type` is not one
        if not typed and not (isinstance(choices, list) and choices):
            return f"{usage}; {name!r} is not one."
    required = form.get("required", []) if isinstance(form, dict) else []
    names = isinstance(required, list) and all(isinstance(name, str) for name in required)
    if not names or not set(required) <= set(properties):
        return f"{usage}; `required` names only its fields."
    return ""


def answer_text(pending: PendingApproval) -> str:
    """What the model reads as the call's result: the answer, or that there was none."""
    note = f"\n\nTheir note: {pending.note}" if pending.note else ""
    if not pending.answer:
        return DECLINED + note
    values = pending.answers.get(QUESTION, {})
    text = values.get(ANSWER)
    if _plain(pending) and isinstance(text, str):
        return text + note
    return msgspec.json.encode(values, order="sorted").decode() + note


def _plain(pending: PendingApproval) -> bool:
    """Whether the question was asked without a form (its answer is one text)."""
    asked = pending.asked
    question = asked.questions.get(QUESTION) if asked is not None else None
    return question is not None and set(question.schema.get("properties", {})) == {ANSWER}


def asked_together(
    calls: tuple[ToolCall, ...], index: int
) -> tuple[tuple[ToolCall, InputAsked], ...]:
    """The `ask_user` calls from `index` on that follow one another with fitting
    arguments: they are asked at once. The first one's must fit."""
    found: list[tuple[ToolCall, InputAsked]] = []
    for call in calls[index:]:
        asked = asked_of(call) if call.name == ASK_USER else ""
        if isinstance(asked, str):
            break
        found.append((call, asked))
    return tuple(found)
