"""Whether a person's answers fit what a tool asks (schemas.questions): the sentences the
gateway answers 422 with, and the agent records when answers reach it unchecked."""

from __future__ import annotations

import pytest

from schemas.questions import Question, answer_problem, defaults_of

FORM = Question(
    "Order?",
    {
        "type": "object",
        "properties": {
            "quantity": {"type": "integer"},
            "price": {"type": "number"},
            "gift": {"type": "boolean"},
            "size": {"type": "string", "enum": ["s", "m"]},
        },
        "required": ["quantity"],
    },
)
PAGE = Question("Sign in", url="https://example.test/login")


@pytest.mark.parametrize(
    ("answers", "sentence"),
    [
        ({}, "The answer to 'form' is missing: it needs 'quantity'."),
        ({"form": {"gift": True}}, "The answer to 'form' is missing 'quantity'."),
        (
            {"form": {"quantity": 1.5}},
            "The answer to 'form' gives 'quantity' 1.5, which is not an integer.",
        ),
        (
            {"form": {"quantity": True}},
            "The answer to 'form' gives 'quantity' true, which is not an integer.",
        ),
        (
            {"form": {"quantity": 1, "size": "xl"}},
            "The answer to 'form' gives 'size' a value it does not offer; it takes one of "
            "'s', 'm'.",
        ),
        (
            {"form": {"quantity": 1, "colour": "red"}},
            "The answer to 'form' names 'colour', which the question does not ask; it asks "
            "'quantity', 'price', 'gift', 'size'.",
        ),
        (
            {"other": {}},
            "There is no question 'other' to answer; the questions are 'form', 'page'.",
        ),
    ],
)
def test_an_answer_that_does_not_fit_gets_a_sentence(
    answers: dict[str, dict[str, object]], sentence: str
) -> None:
    assert answer_problem({"form": FORM, "page": PAGE}, answers) == sentence


def test_an_answer_that_fits_has_no_problem() -> None:
    answers = {"form": {"quantity": 2, "price": 3, "gift": False, "size": "m"}}
    assert answer_problem({"form": FORM, "page": PAGE}, answers) == ""


def test_a_form_has_defaults_only_when_every_field_has_one() -> None:
    assert defaults_of(FORM.schema) is None
    every = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}
    assert defaults_of(every) == {"a": "x"}
