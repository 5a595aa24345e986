"""Hook templates against hostile JSON: fields are pasted once, never evaluated, and
every value and the whole message are bounded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.hooks.template import (
    MESSAGE_CHARS,
    TOO_DEEP,
    VALUE_CHARS,
    TemplateError,
    check,
    render,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)


def test_fields_are_filled_by_their_paths() -> None:
    body = {"pull_request": {"title": "Fix it", "number": 12}, "commits": [{"id": "abc"}]}
    text = render("{{ pull_request.title }} (#{{pull_request.number}}) {{ commits.0.id }}", body)
    assert text == "Fix it (#12) abc"


def test_a_missing_field_is_empty_and_a_structure_is_its_json() -> None:
    body = {"a": {"b": [1, 2]}, "n": None}
    assert render("[{{ nope.x }}][{{ a.b.5 }}][{{ n }}]", body) == "[][][]"
    assert render("{{ a }}", body) == '{"b":[1,2]}'
    assert render("{{ . }}", [True]) == "[true]"


def test_a_value_that_looks_like_a_template_is_pasted_as_it_is() -> None:
    body = {"title": "{{ secret }}", "secret": "s3cr3t"}
    assert render("{{ title }}", body) == "{{ secret }}"


def test_values_and_the_message_are_cut_to_their_bounds() -> None:
    body = {"big": "x" * 100_000}
    one = render("{{ big }}", body)
    assert len(one) == VALUE_CHARS
    assert one.endswith("[…]")
    many = render(" ".join(["{{ big }}"] * 20), body)
    assert len(many) == MESSAGE_CHARS


def test_a_value_nested_too_deeply_to_show_says_so() -> None:
    body: Any = "leaf"
    for _ in range(5000):
        body = {"k": body}
    assert render("{{ k.k.k }}", body) == TOO_DEEP


@given(JSON, st.text(max_size=200))
def test_any_body_and_any_checked_template_render_bounded_text(body: Any, template: str) -> None:
    try:
        check(template)
    except TemplateError:
        return
    assert len(render(template, body)) <= MESSAGE_CHARS


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("", "needs a message template"),
        ("{{ __class__.__mro__ }}x{{ a[0] }}", "cannot be read"),
        ("{{ a | upper }}", "cannot be read"),
        ("x" * 4001, "at most 4000 characters"),
        ("{{ a }}" * 51, "at most 50 placeholders"),
    ],
)
def test_a_template_that_cannot_be_used_says_why(template: str, words: str) -> None:
    with pytest.raises(TemplateError, match=words):
        check(template)
