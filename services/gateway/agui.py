"""AG-UI, pure: a teaspill timeline turned into AG-UI events (no I/O).

One AG-UI run is one turn of the agent the thread names. `Run` takes the items a
follower of the timeline receives (recorded events, live deltas, retractions) and gives
the AG-UI events to send, until the run is over:

- live text of a round: `TEXT_MESSAGE_START`, `TEXT_MESSAGE_CONTENT`...; the round's
  recorded `model_message` sends what the live text had not shown, then `TEXT_MESSAGE_END`;
- `tool_called`: `TOOL_CALL_START/ARGS/END`; `tool_finished`: `TOOL_CALL_RESULT`;
- `approval_requested` (or a parked turn): `RUN_FINISHED` with an interrupt outcome that a
  client answers with a `resume` entry in its next run;
- `approval_requested` of a tool that runs in the page (one of the run's frontend tools):
  `RUN_FINISHED`, after the call's `TOOL_CALL_*` events; the client runs the tool and sends
  its result as a `tool` message in its next run, as AG-UI's frontend tools do;
- `turn_ended`: `RUN_FINISHED` (succeeded: success, with the reply as the result; stopped
  or superseded: cancelled) or `RUN_ERROR` (failed, with the turn's sentence);
- `approval_refused` of an answer this run sent (the agent found it answered already, or
  its turn ended): `RUN_ERROR` with the agent's sentence;
- a round whose live text was taken back (a retry) cannot be unsent: `retracted` tells
  the caller to send a `MESSAGES_SNAPSHOT` of the recorded history before the last event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core.events import RunFinishedCancelledOutcome, RunFinishedInterruptOutcome

from schemas.events import (
    ApprovalRefused,
    ApprovalRequested,
    Event,
    MessageRejected,
    ModelMessage,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnParked,
    TurnStarted,
)
from schemas.live import LiveDelta, Retraction
from schemas.model import Usage

Item = Event | LiveDelta | Retraction
"""What a run translates: what a follower of the timeline is given, keepalives aside."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["approve"],
}


def input_schema(body: ApprovalRequested) -> dict[str, Any]:
    """The answer to a tool's questions: the approval's, with each form's values under
    `answers`, per question key."""
    forms = {key: q.schema for key, q in body.questions.items() if not q.url}
    answers = {"type": "object", "properties": forms}
    properties = {**APPROVAL_SCHEMA["properties"], "answers": answers}
    return {**APPROVAL_SCHEMA, "properties": properties}


def message_id(address: str, turn: int, round_: int) -> str:
    return f"{address}:t{turn}r{round_}"


def call_id(turn: int, round_: int, call: str) -> str:
    """Unique in the thread: a model's own call ids repeat from round to round."""
    return f"t{turn}r{round_}-{call}"


_CALL_ID = re.compile(r"t([0-9]{1,9})r([0-9]{1,9})-(.{1,200})", re.DOTALL)


def parse_call_id(text: str) -> tuple[int, int, str] | None:
    """The turn, round and model's call id of a `call_id`; None for anything else."""
    found = _CALL_ID.fullmatch(text)
    return (int(found[1]), int(found[2]), found[3]) if found else None


def sse(event: BaseEvent) -> bytes:
    return b"data: %s\n\n" % event.model_dump_json(by_alias=True).encode()


@dataclass
class Run:
    """One run: the turn whose `turn_started` carries `message_id` (the id the gateway
    gave the run's message), or `turn` when the run resumes a turn that waited."""

    address: str
    thread_id: str
    run_id: str
    message_id: str = ""
    turn: int | None = None
    finished: bool = False
    retracted: bool = False
    open_text: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Per round whose live text is being sent: its message id and the text sent."""
    attempts: int = 0
    answering: tuple[str, ...] = ()
    """The approval requests this run answers (a resumed run)."""

    def take(self, item: Item) -> list[BaseEvent]:
        if self.finished:
            return []
        if isinstance(item, Event):
            return self._event(item)
        if item.turn != self.turn:
            return []
        if isinstance(item, Retraction):
            return self._retract(item.round)
        return self._delta(item)

    def _event(self, event: Event) -> list[BaseEvent]:
        body = event.body
        refused = self._refusal(body)
        if refused is not None:
            return self._finish([refused])
        if (
            self.turn is None
            and isinstance(body, TurnStarted)
            and self.message_id
            and body.message_id == self.message_id
        ):
            self.turn = event.turn
        if event.turn != self.turn:
            return []
        match body:
            case ApprovalRequested():
                return self._finish([_waiting(event.turn, event.round, body)])
            case TurnParked():
                return self._finish([_parked(body)])
            case TurnEnded():
                return self._finish([_ending(body)])
        return self._content(event)

    def _refusal(self, body: object) -> RunErrorEvent | None:
        """The run's end when the agent refused what it sent: the answer a resumed run
        gave, or the message of a new run (taken, but no turn started for it)."""
        if isinstance(body, ApprovalRefused) and body.request_id in self.answering:
            message = body.message or f"the answer to {body.request_id} changed nothing"
            return RunErrorEvent(message=message, code="approval_refused")
        if (
            self.turn is None
            and isinstance(body, MessageRejected)
            and self.message_id
            and body.message_id == self.message_id
        ):
            return RunErrorEvent(
                message=body.message or "the agent refused the message", code="rejected"
            )
        return None

    def _content(self, event: Event) -> list[BaseEvent]:
        body = event.body
        if isinstance(body, ModelMessage):
            return self._message(event.round, body)
        cid = call_id(event.turn, event.round, getattr(body, "call_id", ""))
        if isinstance(body, ToolCalled):
            return _tool_call(self._mid(event.round), cid, body)
        if isinstance(body, ToolFinished):
            return [_tool_result(cid, body)]
        return []

    def _mid(self, round_: int) -> str:
        return message_id(self.address, self.turn or 0, round_)

    def _delta(self, delta: LiveDelta) -> list[BaseEvent]:
        if not delta.text:
            return []
        events: list[BaseEvent] = []
        mid, shown = self.open_text.get(delta.round, ("", ""))
        if not mid:
            mid = self._new_id(delta.round)
            events.append(TextMessageStartEvent(message_id=mid, role="assistant"))
        self.open_text[delta.round] = (mid, shown + delta.text)
        events.append(TextMessageContentEvent(message_id=mid, delta=delta.text))
        return events

    def _new_id(self, round_: int) -> str:
        """A round's message id; each attempt after a retraction gets a new one."""
        mid = self._mid(round_)
        return f"{mid}:{self.attempts}" if self.attempts else mid

    def _retract(self, round_: int) -> list[BaseEvent]:
        if round_ not in self.open_text:
            return []
        mid, _ = self.open_text.pop(round_)
        self.retracted = True
        self.attempts += 1
        return [TextMessageEndEvent(message_id=mid)]

    def _message(self, round_: int, body: ModelMessage) -> list[BaseEvent]:
        mid, shown = self.open_text.pop(round_, ("", ""))
        if not mid:
            if not body.text:
                return []
            mid = self._new_id(round_)
            return [
                TextMessageStartEvent(message_id=mid, role="assistant"),
                TextMessageContentEvent(message_id=mid, delta=body.text),
                TextMessageEndEvent(message_id=mid),
            ]
        events: list[BaseEvent] = []
        if body.text.startswith(shown):
            rest = body.text[len(shown) :]
            if rest:
                events.append(TextMessageContentEvent(message_id=mid, delta=rest))
        else:
            self.retracted = True
        events.append(TextMessageEndEvent(message_id=mid))
        return events

    def _finish(self, last: list[BaseEvent]) -> list[BaseEvent]:
        events: list[BaseEvent] = [
            TextMessageEndEvent(message_id=mid) for mid, _ in self.open_text.values()
        ]
        self.open_text.clear()
        for event in last:
            if isinstance(event, RunFinishedEvent):
                event.thread_id, event.run_id = self.thread_id, self.run_id
        self.finished = True
        return events + last


def _tool_call(parent: str, cid: str, body: ToolCalled) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(tool_call_id=cid, tool_call_name=body.name, parent_message_id=parent),
        ToolCallArgsEvent(tool_call_id=cid, delta=json.dumps(body.arguments)),
        ToolCallEndEvent(tool_call_id=cid),
    ]


def _tool_result(cid: str, body: ToolFinished) -> BaseEvent:
    return ToolCallResultEvent(
        message_id=f"{cid}:result", tool_call_id=cid, content=body.content, role="tool"
    )


def _waiting(turn: int, round_: int, body: ApprovalRequested) -> BaseEvent:
    """The run's end on a request: the client runs a page tool's call itself (its
    `TOOL_CALL_*` events came before), and answers anything else as an interrupt."""
    if body.page:
        return RunFinishedEvent(thread_id="", run_id="")
    return _interrupt(turn, round_, body)


def _interrupt(turn: int, round_: int, body: ApprovalRequested) -> BaseEvent:
    arguments = json.dumps(body.arguments)
    message = f"Approve the call {body.name}({arguments})?"
    reason, schema = "tool_approval", dict(APPROVAL_SCHEMA)
    if body.questions:
        message = " ".join(q.message for _, q in sorted(body.questions.items()))
        reason, schema = "tool_input", input_schema(body)
    interrupt = Interrupt(
        id=body.request_id,
        reason=reason,
        message=message,
        tool_call_id=call_id(turn, round_, body.call_id),
        response_schema=schema,
    )
    return RunFinishedEvent(
        thread_id="", run_id="", outcome=RunFinishedInterruptOutcome(interrupts=[interrupt])
    )


def _parked(body: TurnParked) -> BaseEvent:
    interrupt = Interrupt(
        id=body.request_id,
        reason="tool_approval",
        message="The turn is parked until this approval is answered.",
        response_schema=APPROVAL_SCHEMA,
    )
    return RunFinishedEvent(
        thread_id="", run_id="", outcome=RunFinishedInterruptOutcome(interrupts=[interrupt])
    )


def _ending(body: TurnEnded) -> BaseEvent:
    usage = [_usage(body.usage)]
    if body.outcome == "failed":
        return RunErrorEvent(message=body.reason or "the turn failed", code="failed", usage=usage)
    if body.outcome == "succeeded":
        return RunFinishedEvent(thread_id="", run_id="", result=body.reply, usage=usage)
    return RunFinishedEvent(
        thread_id="", run_id="", outcome=RunFinishedCancelledOutcome(), usage=usage
    )


def _usage(usage: Usage) -> TokenUsage:
    return TokenUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        cached_input_tokens=usage.cached_tokens,
    )


def snapshot(address: str, events: Iterable[Event]) -> MessagesSnapshotEvent:
    """The conversation so far as AG-UI messages: user turns, the model's messages with
    their tool calls, and tool results."""
    messages: list[Message] = []
    for event in events:
        messages.extend(_as_messages(address, event))
    return MessagesSnapshotEvent(messages=messages)


def _as_messages(address: str, event: Event) -> list[Message]:
    body = event.body
    if isinstance(body, TurnStarted):
        return [UserMessage(id=f"{address}:t{event.turn}:user", content=body.text)]
    if isinstance(body, ModelMessage):
        calls = [
            ToolCall(
                id=call_id(event.turn, event.round, c.id),
                function=FunctionCall(name=c.name, arguments=json.dumps(c.arguments)),
            )
            for c in body.tool_calls
        ]
        mid = message_id(address, event.turn, event.round)
        return [AssistantMessage(id=mid, content=body.text or None, tool_calls=calls or None)]
    if isinstance(body, ToolFinished):
        cid = call_id(event.turn, event.round, body.call_id)
        error = None if body.status == "ok" else body.content
        return [
            ToolMessage(id=f"{cid}:result", tool_call_id=cid, content=body.content, error=error)
        ]
    return []
