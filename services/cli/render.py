"""Timeline events as one line each, for people at a terminal."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from schemas.events import (
    AgentForked,
    AgentPaused,
    AgentResumed,
    ApprovalAbandoned,
    ApprovalAnswered,
    ApprovalRefused,
    ApprovalRequested,
    ArtifactWritten,
    ChildReported,
    ChildSpawned,
    ContextFolded,
    Event,
    HandedOff,
    MemoriesExtracted,
    MessageQueued,
    MessageRejected,
    MessageSteered,
    ModelFallback,
    ModelMessage,
    PageCallClaimed,
    ScheduleFired,
    ScheduleSkipped,
    StopRefused,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnParked,
    TurnStarted,
    Waiting,
)
from schemas.questions import Question

WIDTH = 100


def short(text: str, width: int = WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe(event: Event) -> str:
    """One line for any event; a body this CLI has no words for (a newer stack's) is shown
    by its tag rather than failing the command."""
    words = _WORDS.get(type(event.body), _unnamed)
    return f"  #{event.seq:<4} {words(event, event.body)}"


def _unnamed(event: Event, body: Any) -> str:
    tag = body.__struct_config__.tag if isinstance(body, msgspec.Struct) else None
    return str(tag) if tag else "an event this version of teaspill cannot show"


def _arguments(arguments: dict[str, Any]) -> str:
    return short(json.dumps(arguments), 60)


def _question(question: Question) -> str:
    """A question as a person answers it: what it asks and, for a form, its fields."""
    if question.url:
        return f"{question.message} (open {question.url}, then approve or deny)"
    properties: dict[str, Any] = question.schema.get("properties") or {}
    required = set(question.schema.get("required") or ())
    fields = ", ".join(_field(name, prop, name in required) for name, prop in properties.items())
    return f"{question.message} [{fields}]" if fields else question.message


def _field(name: str, prop: object, required: bool) -> str:
    kind = prop.get("type", "value") if isinstance(prop, dict) else "value"
    choices = prop.get("enum") if isinstance(prop, dict) else None
    notes = [*(["required"] if required else [])]
    if isinstance(choices, list):
        notes.append("one of " + ", ".join(map(str, choices)))
    return f"{name} {kind}" + (f" ({'; '.join(notes)})" if notes else "")


def _asked(body: Any) -> str:
    """An approval request, or (`ask_user`) the model's question to the person."""
    questions = "".join(f"; asks {k}: {_question(q)}" for k, q in sorted(body.questions.items()))
    if body.name == "ask_user":
        return f"asks the person {body.request_id}" + questions
    return f"asks approval {body.request_id} for {body.name}({_arguments(body.arguments)})" + (
        questions
    )


def _ended(event: Event, body: Any) -> str:
    return f"turn {event.turn} {body.outcome}" + (f": {body.reason}" if body.reason else "")


def _answered(event: Event, body: Any) -> str:
    verdict = "approved" if body.approve else "denied"
    return f"{body.request_id} {verdict}" + (f" by {body.by}" if body.by else "")


_WORDS: dict[type, Callable[[Event, Any], str]] = {
    TurnStarted: lambda e, b: f"turn {e.turn} started: {short(b.text)}",
    MessageQueued: lambda e, b: f"queued behind turn {e.turn}: {short(b.text)}",
    MessageSteered: lambda e, b: f"joined turn {e.turn}: {short(b.text)}",
    MessageRejected: lambda e, b: f"rejected: {short(b.text)} ({b.message})",
    AgentPaused: lambda e, b: "paused" + (f" by {b.by}" if b.by else ""),
    AgentResumed: lambda e, b: "resumed" + (f" by {b.by}" if b.by else ""),
    AgentForked: lambda e, b: (
        f"forked from {b.source} at seq {b.seq}" + (f" by {b.by}" if b.by else "")
    ),
    ModelMessage: lambda e, b: _model(b),
    ModelFallback: lambda e, b: (
        f"{b.model} failed, the round starts again on {b.next}: {short(b.reason)}"
    ),
    ToolCalled: lambda e, b: f"calls {b.name}({_arguments(b.arguments)})",
    ToolFinished: lambda e, b: f"{b.name} → {b.status}: {short(b.content)}",
    ArtifactWritten: lambda e, b: f"wrote {b.path} ({b.size} bytes, sha256 {b.sha256[:12]})",
    ChildSpawned: lambda e, b: f"spawned {b.child}" + (f" ({b.stage})" if b.stage else ""),
    HandedOff: lambda e, b: f"handed off from {b.from_kind} to {b.kind} (v{b.version})",
    ChildReported: lambda e, b: f"{b.child} finished ({b.outcome}): {short(b.reply)}",
    Waiting: lambda e, b: f"waiting for {', '.join(b.pending)}",
    ApprovalRequested: lambda e, b: _asked(b),
    PageCallClaimed: lambda e, b: f"{b.request_id} claimed by page {b.page}",
    ApprovalAnswered: _answered,
    ApprovalAbandoned: lambda e, b: f"{b.request_id} abandoned: its outcome is unknown",
    ApprovalRefused: lambda e, b: f"an answer to {b.request_id} was refused: {b.message}",
    StopRefused: lambda e, b: f"a stop was refused: {b.message}",
    TurnParked: lambda e, b: f"turn {e.turn} parked, still waiting for {b.request_id}",
    TurnEnded: _ended,
    ContextFolded: lambda e, b: _folded(b),
    MemoriesExtracted: lambda e, b: (
        f"kept {len(b.ids)} memories in the {b.scope} scope"
        + (f" ({b.problem})" if b.problem else "")
    ),
    ScheduleFired: lambda e, b: f"schedule {b.schedule} fired" + (f": {b.note}" if b.note else ""),
    ScheduleSkipped: lambda e, b: f"schedule {b.schedule} skipped: {b.reason}",
}


def _folded(body: ContextFolded) -> str:
    turns = (
        f"turn {body.first_turn}"
        if body.first_turn == body.last_turn
        else f"turns {body.first_turn}-{body.last_turn}"
    )
    by = body.model or "extractive summary"
    tokens = f"{body.tokens_before} → {body.tokens_after} tokens"
    return f"folded {turns} ({by}, {tokens}): {short(body.summary)}"


def _model(body: ModelMessage) -> str:
    usage = body.usage
    tokens = (
        f"{usage.prompt_tokens} prompt ({usage.cached_tokens} cached), "
        f"{usage.completion_tokens} completion tokens"
    )
    said = short(body.text) if body.text else ", ".join(c.name for c in body.tool_calls)
    return f"{body.model} [{tokens}]: {said}"
