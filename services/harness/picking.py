"""How a router or a handoff picks one of its listed kinds: by rule or by a model call.
Whatever is answered, the pick is one of the listed kinds or a sentence saying why none
is (prefixed `!`): a kind not listed is never reached."""

from __future__ import annotations

import re

from schemas.chat import ChatMessage
from schemas.compose import Handoff, Router
from schemas.harness import TurnState
from schemas.model import ModelRequest

PICK_ROUND = 1
"""The round of the model call that picks (the turn's first)."""


def rule_pick(composition: Router | Handoff, text: str) -> str:
    """The kind of the first rule whose text the message holds (ignoring case), else the
    default."""
    lowered = text.casefold()
    for rule in composition.rules:
        if rule.contains.casefold() in lowered:
            return rule.kind
    if composition.default:
        return composition.default
    return f"!No rule matched the message, and the {_what(composition)} has no default kind."


def pick_request(
    address: str, turn: TurnState, composition: Router | Handoff, text: str
) -> ModelRequest:
    """A model call shown no tools, asked to answer with one of the listed kinds."""
    spec = turn.spec
    listed = ", ".join(composition.kinds)
    system = (
        f"{spec.instructions}\n\nPick the one kind of agent best suited to answer the "
        f"message, from: {listed}. Answer with its name only."
    )
    return ModelRequest(
        model=spec.model,
        fallback=spec.fallback,
        local_only=spec.local_only,
        messages=(ChatMessage("system", system), ChatMessage("user", text)),
        max_tokens=spec.limits.max_tokens,
        call_key=f"{address}/t{turn.number}/r{PICK_ROUND}",
        agent=address,
        turn=turn.number,
        round=PICK_ROUND,
    )


def chosen(composition: Router | Handoff, answer: str) -> str:
    """The listed kind the answer names (the whole answer, else the first named in it),
    else the default, else a sentence."""
    said = answer.strip().strip(".\"'`").strip()
    if said in composition.kinds:
        return said
    found = [
        (match.start(), kind)
        for kind in composition.kinds
        if (match := re.search(rf"(?<![\w-]){re.escape(kind)}(?![\w-])", answer))
    ]
    if found:
        return min(found)[1]
    if composition.default:
        return composition.default
    listed = ", ".join(composition.kinds)
    return (
        f"!The {_what(composition)}'s model answered {answer.strip()[:80]!r}, which names none "
        f"of its kinds ({listed}), and it has no default kind."
    )


def _what(composition: Router | Handoff) -> str:
    return "router" if isinstance(composition, Router) else "handoff"
