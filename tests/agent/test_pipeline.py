"""The check of a tool call's arguments against the tool's JSON Schema, and the sentence
the model gets when they do not fit."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from services.agent.pipeline import ArgumentChecker

CALCULATOR = {
    "type": "object",
    "properties": {"expression": {"type": "string"}},
    "required": ["expression"],
}

SCHEMAS: list[dict[str, Any]] = [
    CALCULATOR,
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "pattern": "^[a-z/._-]+$"},
            "lines": {"type": "integer", "minimum": 1, "maximum": 500},
            "mode": {"enum": ["read", "write"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}},
]

INSTANCES: list[dict[str, Any]] = [
    {},
    {"expression": "12 * 7"},
    {"expression": 42},
    {"expression": None},
    {"path": "a/b.txt"},
    {"path": "A B"},
    {"path": ""},
    {"path": "a", "lines": 1.0},
    {"path": "a", "lines": 2.5},
    {"path": "a", "lines": 0},
    {"path": "a", "mode": "append"},
    {"path": "a", "tags": ["x", "y", "z"]},
    {"path": "a", "other": True},
    {"when": "not a date"},
    {"when": "2026-12-01"},
]


def test_arguments_that_fit_have_no_problem() -> None:
    assert ArgumentChecker(CALCULATOR).problem("calculator", {"expression": "1 + 1"}) is None


def test_arguments_that_do_not_fit_get_jsonschemas_sentence() -> None:
    problem = ArgumentChecker(CALCULATOR).problem("calculator", {"expression": 42})
    assert problem == (
        "The arguments of calculator are not valid: expression: 42 is not of type 'string'."
    )
    missing = ArgumentChecker(CALCULATOR).problem("calculator", {})
    assert missing == (
        "The arguments of calculator are not valid: the arguments: "
        "'expression' is a required property."
    )


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_verdict_is_jsonschemas(schema: dict[str, Any]) -> None:
    """The checker's verdict is jsonschema's on these schemas and arguments (a format is
    not checked, as jsonschema does not check it without a format checker)."""
    checker = ArgumentChecker(schema)
    reference = jsonschema.validators.validator_for(schema)(schema)
    for instance in INSTANCES:
        assert (checker.problem("tool", instance) is None) == reference.is_valid(instance), instance


def test_a_pattern_is_read_as_python_reads_it() -> None:
    """`\\Z` is Python's end of text, not an ECMA-262 escape: the pattern is taken as
    Python's `re` reads it."""
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^a+\\Z"}}}
    checker = ArgumentChecker(schema)
    assert checker.problem("tool", {"word": "aaa"}) is None
    problem = checker.problem("tool", {"word": "ab"})
    assert problem is not None
    assert problem.startswith("The arguments of tool are not valid: word: 'ab' does not match")
