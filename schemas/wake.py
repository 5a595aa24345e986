"""Wakes: what arrives at an agent and makes it do some work.

A wake is the input of the agent's exclusive `wake` handler. Restate's serializer takes
one Struct per value, so the union travels inside `WakeEnvelope`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

import msgspec

from schemas.chat import ToolDefinition
from schemas.model import Usage
from schemas.spec import AgentSpec, WhileBusy


class SpanRef(msgspec.Struct, frozen=True):
    """A span of a trace (OpenTelemetry's ids, in hex), for a span in another trace to link
    to."""

    trace_id: str
    span_id: str


class ParentRef(msgspec.Struct, frozen=True):
    """Where a child reports back: the parent's address, turn and the spawning call."""

    address: str
    turn: int
    call_id: str
    span: SpanRef | None = None
    """The parent's span of the spawn, which the child's wake and the parent's wake on the
    child's report link to; None when the parent's process traced nothing."""


class Fired(msgspec.Struct, frozen=True):
    """Set on a message a schedule sent: which one, and the fire it was planned as."""

    schedule: str
    planned: datetime
    missed: int = 0
    """Planned fires that fell between `planned` and the fire's real time (the service was
    down): they are not run one by one; this fire stands for them all."""
    sent: datetime | None = None
    """When the schedule sent it (its fire's own time)."""


class Message(msgspec.Struct, frozen=True, tag="message"):
    """A user message. It starts a turn, or queues behind the turn in progress."""

    text: str
    spec: AgentSpec | None = None
    """An ad-hoc spec to run this turn with (and later ones)."""
    kind: str | None = None
    """A published kind: the turn runs with its newest version. An agent's first message
    needs a spec or a kind."""
    parent: ParentRef | None = None
    """Set when a parent spawned this agent; the turn's end is reported there."""
    depth: int = 0
    """0 for agents addressed from outside, parent's depth + 1 for children."""
    budget: int | None = None
    """Set on a child's message by its parent: the agents the child's turn and its own
    descendants may still bring into being (never more than its spec's
    `max_descendants`); None for a message from outside, whose turn has the whole of
    `max_descendants`."""
    id: str = ""
    """The sender's id for this message, carried on the `turn_started` it starts, so the
    sender finds its turn without comparing texts (two equal messages are two turns)."""
    schedule: Fired | None = None
    """Set when a schedule sent the message."""
    while_busy: WhileBusy | None = None
    """What the message does if a turn is in progress when it arrives; None for the
    spec's `while_busy` (`queue` unless the spec says otherwise). A sender sends it with
    `services.durable.deliver` (from a handler) or the ingress client's `send_message`,
    which also tell a running turn that it arrived."""
    tokens: int | None = None
    """Set on a composition's stage by its parent: the model tokens the stage's turn may
    use at most (its share of what the composition has left); None for no share."""
    user: str = ""
    """The end user who sent it, as their token named them (a publishable key's request);
    empty for a message sent with a tenant-wide key. Carried on the events it makes."""
    max_depth: int | None = None
    """Set on a child's message by its parent: the depth the child's descendants may reach
    at most (the parent's own bound), whatever the child's spec says."""
    page_tools: tuple[ToolDefinition, ...] = ()
    """The tools the sending page runs itself (`schemas.pages`): the turn shows the model
    those its spec grants, and a call to one waits for a page to run it."""


def policy(message: Message, spec: AgentSpec | None) -> WhileBusy:
    """The policy `message` follows: its own, else its agent's spec's."""
    if message.while_busy is not None:
        return message.while_busy
    return spec.while_busy if spec is not None else "queue"


class ChildReport(msgspec.Struct, frozen=True, tag="child_report"):
    """A child's turn ended; `reply` is its final text (or why it failed)."""

    child: str
    turn: int
    call_id: str
    outcome: str
    reply: str
    span: SpanRef | None = None
    """The parent's span of the spawn (its `ParentRef.span`), which the wake on the report
    links to."""
    usage: Usage = Usage()
    """The model tokens the child's turn used (a composition counts them as its own)."""


class Timer(msgspec.Struct, frozen=True, tag="timer"):
    """A delayed send the agent made to itself."""

    name: str
    turn: int = 0


class Approval(msgspec.Struct, frozen=True, tag="approval"):
    """A person's answer to an `approval_requested` event."""

    request_id: str
    approve: bool
    note: str = ""
    by: str = ""
    answers: dict[str, dict[str, Any]] = {}
    """Answers to the questions of a tool's input request (`approval_requested`'s
    `questions`), per question key."""


def answer_key(answer: Approval) -> str:
    """The idempotency key of a one-way answer: the same answer from the same sender is one
    send however often it is retried; a different answer is another send, which the agent
    refuses on its timeline when the first one was applied."""
    said = f"{answer.approve}\n{answer.by}\n{answer.note}".encode()
    if answer.answers:
        said += b"\n" + msgspec.json.encode(answer.answers, order="sorted")
    return f"approval {answer.request_id} {hashlib.sha256(said).hexdigest()[:24]}"


class PageCall(msgspec.Struct, frozen=True, tag="page_call"):
    """A page's part in a call that runs in the page: its claim of a request (`claimed`),
    the result of a request it claimed (`result`), or that its stream closed (`closed`,
    no request: every request it claimed and did not answer has an unknown outcome)."""

    step: Literal["claimed", "result", "closed"]
    page: str
    """The page's own id, the same on its stream, its claim and its result."""
    request_id: str = ""
    content: str = ""
    """The result (`result`): what the model reads, capped by the gateway."""
    status: Literal["ok", "error"] = "ok"
    kind: Literal["response", "page", "other"] = "other"
    """What the result holds, for its cap (`schemas.pages.RESULT_CAPS`)."""


class ScheduleSkip(msgspec.Struct, frozen=True, tag="schedule_skip"):
    """A schedule's fire found the agent busy and its policy is to skip: recorded, not run."""

    schedule: str
    planned: datetime


class Stop(msgspec.Struct, frozen=True, tag="stop"):
    """End the turn in progress as stopped."""

    by: str = ""
    turn: int = 0
    """The turn to stop; 0 for whichever is in progress. A stop naming a turn that is not
    the one in progress stops nothing (`stop_refused`), so a stop meant for a turn that
    just ended never reaches the next one."""


class Pause(msgspec.Struct, frozen=True, tag="pause"):
    """Hold the agent: a running turn stops at its next round boundary, and nothing runs
    until `Resume`; what arrives meanwhile is kept, in order."""

    by: str = ""


class Resume(msgspec.Struct, frozen=True, tag="resume"):
    """Run again: the held turn goes on, then what arrived while paused, in order."""

    by: str = ""


Wake = Message | ChildReport | Timer | Approval | PageCall | Stop | ScheduleSkip | Pause | Resume


class Arrival(msgspec.Struct, frozen=True):
    """The input of the agent's shared `arrived` handler: a message sent to its `wake`
    (whose invocation is `invocation`) that may act on a turn running now."""

    message: Message
    invocation: str


def acts_on_a_running_turn(message: Message) -> bool:
    """Whether a running turn should hear of `message` at once: a sender tells the
    `arrived` handler of every message but one that is rejected (which waits for the
    wake it is): it interrupts, steers, or is recorded queued by the running turn."""
    return message.while_busy != "reject"


class WakeEnvelope(msgspec.Struct, frozen=True):
    wake: Wake
