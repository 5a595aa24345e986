"""Timeline events as one line each, for people at a terminal."""

from __future__ import annotations

import json

from schemas.events import (
    ChildReported,
    ChildSpawned,
    Event,
    MessageQueued,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
    Waiting,
)

WIDTH = 100


def short(text: str, width: int = WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe(event: Event) -> str:
    body = event.body
    match body:
        case TurnStarted(text=text):
            what = f"turn {event.turn} started: {short(text)}"
        case MessageQueued(text=text):
            what = f"queued behind turn {event.turn}: {short(text)}"
        case ModelMessage():
            what = _model(body)
        case ToolCalled(name=name, arguments=arguments):
            what = f"calls {name}({short(json.dumps(arguments), 60)})"
        case ToolFinished(name=name, status=status, content=content):
            what = f"{name} → {status}: {short(content)}"
        case ChildSpawned(child=child):
            what = f"spawned {child}"
        case ChildReported(child=child, outcome=outcome, reply=reply):
            what = f"{child} finished ({outcome}): {short(reply)}"
        case Waiting(pending=pending):
            what = f"waiting for {', '.join(pending)}"
        case TurnEnded(outcome=outcome, reason=reason):
            what = f"turn {event.turn} {outcome}" + (f": {reason}" if reason else "")
    return f"  #{event.seq:<4} {what}"


def _model(body: ModelMessage) -> str:
    usage = body.usage
    tokens = (
        f"{usage.prompt_tokens} prompt ({usage.cached_tokens} cached), "
        f"{usage.completion_tokens} completion tokens"
    )
    said = short(body.text) if body.text else ", ".join(c.name for c in body.tool_calls)
    return f"{body.model} [{tokens}]: {said}"
