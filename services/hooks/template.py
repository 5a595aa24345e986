"""A hook's message template: text with `{{ path }}` placeholders, filled from JSON.

A placeholder names a field by a dotted path (`pull_request.title`, `commits.0.id`) or
the whole body (`{{ . }}`); nothing else is evaluated, so a template runs no code and a
delivered body is only ever data: what a field holds is pasted once, never read as a
template. Every value and the whole message are cut to a bound.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
PATH = re.compile(r"^(?:\.|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\Z")
MOST_PLACEHOLDERS = 50
TEMPLATE_CHARS = 4000
VALUE_CHARS = 4000
MESSAGE_CHARS = 32768
CUT = " […]"
TOO_DEEP = "(a value nested too deeply to show)"


class TemplateError(ValueError):
    """A template that cannot be used; the message is a sentence saying what is accepted."""


def check(template: str) -> None:
    if not template.strip():
        raise TemplateError("A hook needs a message template.")
    if len(template) > TEMPLATE_CHARS:
        raise TemplateError(f"A template has at most {TEMPLATE_CHARS} characters.")
    paths = PLACEHOLDER.findall(template)
    if len(paths) > MOST_PLACEHOLDERS:
        raise TemplateError(f"A template has at most {MOST_PLACEHOLDERS} placeholders.")
    for path in paths:
        if not PATH.match(path):
            raise TemplateError(
                f"The placeholder {{{{ {path} }}}} cannot be read: name a field by its path "
                "of names and list positions joined by dots, as in {{ pull_request.title }} "
                "or {{ commits.0.id }}, or the whole body as {{ . }}."
            )


def render(template: str, body: Any) -> str:
    """The message for one delivered body (decoded JSON)."""
    text = PLACEHOLDER.sub(lambda match: _value(_lookup(body, match.group(1))), template)
    return _cut(text, MESSAGE_CHARS)


def _lookup(body: Any, path: str) -> Any:
    if path == ".":
        return body
    found = body
    for part in path.split("."):
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            return None
    return found


def _value(found: Any) -> str:
    if found is None:
        return ""
    if isinstance(found, str):
        return _cut(found, VALUE_CHARS)
    try:
        return _cut(msgspec.json.encode(found).decode(), VALUE_CHARS)
    except RecursionError:
        return TOO_DEEP


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - len(CUT)] + CUT
