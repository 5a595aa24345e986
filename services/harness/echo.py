"""Whether a reply only repeats a read-back, pure.

A read-back is what a tool returned of the conversation or of what the agent keeps
(`recall`, `search_memory`): the model's own past, never an answer in itself. A small
model shown one can take it for the reply and write it out again; such a reply is not
returned as the answer (the loop asks once more, `NUDGE`). The results of other tools
are left alone: a command's output or a calculation may well be the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec

from schemas.chat import ChatMessage
from services.harness.builtins import RECALL

READ_BACKS = frozenset({RECALL, "search_memory"})
"""Tools whose results are read-backs: `recall`, and the memory search the deployment
offers (`services/tools/memory.py`)."""
SHINGLE = 4
"""Words in one shingle: a reply is compared with a read-back four words at a time."""
MIN_WORDS = 8
"""A reply shorter than this is never taken for a copy (a name, a number, a yes)."""
COPIED_SHARE = 0.8
"""A reply with at least this share of its shingles in one read-back repeats it."""
FRAMINGS = ('"turns":', '"messages":', '"memories":', '"result_of":', "returned:")
"""Text that only a read-back's own shape carries: a reply holding it repeats one."""
NUDGE = "nudge"
"""The `name` of the system message that asks the model, once a turn, to answer."""
NUDGE_TEXT = (
    "Your last message only repeated what a tool read back. Do not call a tool now: "
    "answer the user's last message yourself, in your own words."
)

_WORD = re.compile(r"\w+")


def read_backs(messages: Iterable[ChatMessage]) -> tuple[str, ...]:
    return tuple(m.content for m in messages if m.role == "tool" and m.name in READ_BACKS)


def repeats(reply: str, results: Iterable[str]) -> bool:
    """Whether `reply` only repeats one of `results` (each a read-back's text)."""
    if any(framing in reply for framing in FRAMINGS):
        return True
    words = _WORD.findall(reply.casefold())
    if len(words) < MIN_WORDS:
        return False
    mine = _shingles(words)
    for result in results:
        theirs = _shingles(_WORD.findall(" ".join(_texts(result)).casefold()))
        if len(mine & theirs) >= COPIED_SHARE * len(mine):
            return True
    return False


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + SHINGLE]) for i in range(max(len(words) - SHINGLE + 1, 1))}


def _texts(result: str) -> list[str]:
    """The result's text and, when it is JSON, the strings inside it (a `recall` answer's
    messages), so a reply that copies a recalled message unescaped is found too."""
    try:
        value = msgspec.json.decode(result)
    except msgspec.DecodeError:
        return [result]
    return [result, *_strings(value)]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def nudge() -> ChatMessage:
    return ChatMessage(role="system", name=NUDGE, content=NUDGE_TEXT)


def nudged(messages: Iterable[ChatMessage]) -> bool:
    return any(m.role == "system" and m.name == NUDGE for m in messages)
