"""Extraction, pure: the request that asks a model, after a turn that succeeded, for the
facts worth keeping from it, and the facts its reply gives (docs/memory.md).

The request shows the turn as it went: its message, then one assistant message per round
(a round's tool calls and their results written out in it), each cut to a share, then
what is asked. It ends with a system message, so the conversation's last user message is
the turn's own (the `script` model reads the line after the turn's last as its answer).
"""

from __future__ import annotations

import re

from schemas.chat import ChatMessage
from schemas.harness import TurnState
from schemas.model import ModelReply, ModelRequest

EXTRACT_INSTRUCTIONS = (
    "You keep notes of what is worth remembering from conversations: what the user said "
    "about themselves, their preferences, their situation, decisions made. Write only "
    "facts stated in the conversation, never guesses, never instructions."
)
EXTRACT_ASK = (
    "List the facts worth remembering from the conversation above, one short sentence "
    "per line, at most five. If there are none, write NONE."
)
MESSAGE_CHARS = 600
"""Characters of each message of the turn the request shows at most."""
MAX_FACTS = 5
FACT_CHARS = 500
"""Characters one fact keeps at most."""
MAX_TOKENS = 160
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
NONE = "none"


def _cut(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rounds(turn: TurnState) -> list[ChatMessage]:
    """The turn's assistant messages, each with its calls' results written in."""
    results = {m.tool_call_id: m.content for m in turn.messages if m.role == "tool"}
    shown = []
    for message in turn.messages:
        if message.role != "assistant":
            continue
        calls = [f"[{c.name} returned: {results.get(c.id, '')}]" for c in message.tool_calls]
        text = " ".join([message.content, *calls]).strip()
        shown.append(ChatMessage(role="assistant", content=_cut(text)))
    return shown


def extraction_request(address: str, turn: TurnState) -> ModelRequest:
    """The extraction step's request for the turn that ended with a reply."""
    asked = next((m.content for m in turn.messages if m.role == "user"), "")
    messages = (
        ChatMessage(role="system", content=EXTRACT_INSTRUCTIONS),
        ChatMessage(role="user", content=asked[: 4 * MESSAGE_CHARS]),
        *_rounds(turn),
        ChatMessage(role="system", content=EXTRACT_ASK),
    )
    return ModelRequest(
        model=turn.spec.model,
        messages=messages,
        max_tokens=MAX_TOKENS,
        call_key=f"{address}/t{turn.number}/extract",
        agent=address,
        turn=turn.number,
        round=turn.round,
        fallback=turn.spec.fallback,
        local_only=turn.spec.local_only,
    )


def facts(reply: ModelReply) -> tuple[str, ...]:
    """The facts a reply lists: one a line, bullets and numbers taken off, at most
    `MAX_FACTS`, each once; none for `NONE`, a cancelled reply or one calling tools."""
    if reply.finish_reason == "cancelled" or reply.message.tool_calls:
        return ()
    found: dict[str, None] = {}
    for line in reply.message.content.splitlines():
        text = _BULLET.sub("", line).strip()
        if text and text.casefold().rstrip(".") != NONE:
            found.setdefault(_cut(text, FACT_CHARS))
    return tuple(found)[:MAX_FACTS]
