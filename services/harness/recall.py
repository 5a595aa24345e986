"""The built-in `recall` tool, pure: its arguments, and its answer from the messages read.

The answer is JSON: the turns' original messages (as recorded, never cut by folding), in
total at most `RECALL_LIMIT` characters of content; a message cut by that limit says
where to read on (`message` and `offset`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from schemas.chat import ChatMessage, ToolCall

RECALL_LIMIT = 16_000
"""Characters of message content one answer returns, like any tool result."""
SEARCH_SEGMENTS = 64
"""A query reads at most this many history segments, newest first."""
MATCHES = 3
"""A query returns at most this many turns."""


@dataclass(frozen=True)
class RecallQuery:
    turn: int | None
    query: str
    message: int | None
    offset: int


class Recalled(msgspec.Struct, frozen=True):
    index: int
    role: str
    content: str
    name: str | None = None
    offset: int = 0
    length: int = 0
    """The message's whole length in characters: more follows when offset + len < it."""


class RecalledTurn(msgspec.Struct, frozen=True):
    turn: int
    messages: tuple[Recalled, ...]


class RecallAnswer(msgspec.Struct, frozen=True):
    turns: tuple[RecalledTurn, ...]
    note: str = ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse(call: ToolCall) -> RecallQuery | str:
    """The call's query, or a sentence saying what is wrong with its arguments."""
    args = call.arguments
    turn, message, offset = (
        _int(args.get("turn")),
        _int(args.get("message")),
        _int(args.get("offset")),
    )
    query = args.get("query")
    text = query.strip() if isinstance(query, str) else ""
    if turn is None and not text:
        return "recall needs `turn` (an integer turn number) or `query` (words to look for)."
    if (turn is not None and turn < 1) or (message is not None and message < 0):
        return "recall's `turn` counts from 1 and `message` from 0."
    return RecallQuery(turn, text if turn is None else "", message, max(offset or 0, 0))


def matches(messages: tuple[ChatMessage, ...], query: str) -> bool:
    needle = query.casefold()
    return any(needle in m.content.casefold() for m in messages)


def answer(query: RecallQuery, found: list[tuple[int, tuple[ChatMessage, ...]]]) -> str:
    """`found`: (turn, its messages in order) for each turn read."""
    if not found:
        wanted = f"turn {query.turn}" if query.turn is not None else repr(query.query)
        return msgspec.json.encode(RecallAnswer((), f"Nothing recorded matches {wanted}.")).decode()
    room, turns, note = RECALL_LIMIT, [], ""
    for turn, messages in found:
        shown: list[Recalled] = []
        for index, message in enumerate(messages):
            if query.message is not None and index != query.message:
                continue
            offset = query.offset if query.message is not None else 0
            content = message.content[offset : offset + max(room, 0)]
            room -= len(content)
            end = offset + len(content)
            shown.append(
                Recalled(index, message.role, content, message.name, offset, len(message.content))
            )
            if end < len(message.content):
                note = (
                    f"Cut: call recall with turn={turn}, message={index}, offset={end} to read on."
                )
                break
        turns.append(RecalledTurn(turn, tuple(shown)))
        if note:
            break
    return msgspec.json.encode(RecallAnswer(tuple(turns), note)).decode()


BACK_REFERENCES = re.compile(
    r"\b(earlier|before|first|previous(ly)?|last time|ago|remember|recall|mentioned|"
    r"you (said|wrote|told|answered)|i (said|told|asked|wrote|mentioned)|"
    r"we (said|talked|discussed)|turn \d+)\b"
)
"""Words by which a message points back at earlier turns: only then can `recall` help."""


def refers_back(text: str) -> bool:
    """Whether `text` asks about earlier turns of the conversation."""
    return BACK_REFERENCES.search(text.casefold()) is not None
