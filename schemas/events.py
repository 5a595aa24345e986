"""Timeline events: the record of everything an agent does, in `seq` order.

Evolving this schema: add optional fields with defaults and new event types only; never
rename, retype or remove a field, and never reuse a tag. Old payloads must keep decoding
(tests hold a set of them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

import msgspec

from schemas.chat import ToolCall
from schemas.harness import ToolStatus
from schemas.model import Timing, Usage
from schemas.questions import Question

Outcome = Literal["succeeded", "stopped", "failed", "parked", "superseded"]


class TurnStarted(msgspec.Struct, frozen=True, tag="turn_started"):
    text: str
    spec_kind: str
    spec_version: int
    parent: str | None = None
    message_id: str = ""
    """The id the sender gave the message that started the turn (`Message.id`); empty
    when it gave none."""
    user: str = ""
    """The end user whose message started the turn (`Message.user`); empty for a message
    sent with a tenant-wide key."""


class MessageQueued(msgspec.Struct, frozen=True, tag="message_queued"):
    """A message arrived while a turn was in progress (or the agent was paused); it runs
    when that turn ends (or once the agent is resumed)."""

    text: str
    message_id: str = ""
    """The sender's id for the message (`Message.id`), which its later `turn_started`
    carries too; empty when it gave none."""
    user: str = ""
    """The end user who sent it (`Message.user`); empty for a tenant-wide key's message."""


class ScheduleFired(msgspec.Struct, frozen=True, tag="schedule_fired"):
    """A schedule sent its message (the `turn_started` or `message_queued` that follows)."""

    schedule: str
    planned: datetime
    missed: int = 0
    """Planned fires that fell between `planned` and this one, while the service was down:
    this fire stands for all of them."""
    note: str = ""
    sent: datetime | None = None
    """When the schedule sent the message; the event's `at` is when the agent took it."""


class ScheduleSkipped(msgspec.Struct, frozen=True, tag="schedule_skipped"):
    """A schedule's fire found a turn in progress, and its policy is to skip."""

    schedule: str
    planned: datetime
    reason: str = ""


class MessageSteered(msgspec.Struct, frozen=True, tag="message_steered"):
    """A message (`while_busy: steer`) joined the turn in progress: the model reads it in
    the turn's next round, and it starts no turn of its own."""

    text: str
    message_id: str = ""


class MessageRejected(msgspec.Struct, frozen=True, tag="message_rejected"):
    """A message ran nothing: it found a turn in progress (or the agent paused) and asked
    to be rejected then, it came past a full queue, or its turn was not funded (the
    tenant's day of tokens or the agent's was used: no turn started)."""

    text: str
    message_id: str = ""
    message: str = ""
    """One sentence saying why."""


class ModelMessage(msgspec.Struct, frozen=True, tag="model_message"):
    model: str
    """The model that wrote the message (after any fallback)."""
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    timing: Timing = Timing()
    fingerprint: str = ""
    """sha256 of the prompt's stable prefix (instructions and tool definitions), as hex."""
    folds_fingerprint: str = ""
    """sha256 of the prefix and the fold summaries after it: equal across rounds until the
    next fold."""
    memories: tuple[str, ...] = ()
    """Ids of the memory records the prompt showed (after the fold summaries)."""


class ModelFallback(msgspec.Struct, frozen=True, tag="model_fallback"):
    """A model failed during the round; the round started again on `next`, and what the
    failed model had written live was taken back."""

    model: str
    next: str
    reason: str


class ContextFolded(msgspec.Struct, frozen=True, tag="context_folded"):
    """The oldest verbatim turns were folded into a summary the model sees instead. Their
    messages stay on the timeline and in the history; `recall` reads them back."""

    first_turn: int
    last_turn: int
    summary: str
    tokens_before: int
    """The prompt's estimated tokens before the fold, and after it."""
    tokens_after: int
    model: str
    """The model that wrote the summary; empty when the extractive summary was used."""
    extractive: bool = False
    reason: str = ""
    """Why the extractive summary was used, when it was."""


class MemoriesExtracted(msgspec.Struct, frozen=True, tag="memories_extracted"):
    """After the turn's reply, a model step (the spec's `memory.extract`) listed the facts
    worth keeping, and they were remembered: their records' ids, never their text (which
    lives in the scope's memory alone, so forgetting it leaves none here)."""

    ids: tuple[str, ...]
    scope: str
    """The scope they were kept in: `user` (the turn's end user's) or `agent`."""
    model: str = ""
    problem: str = ""
    """Why nothing was kept, when the step failed."""


class ToolCalled(msgspec.Struct, frozen=True, tag="tool_called"):
    call_id: str
    name: str
    arguments: dict[str, Any] = {}


class ToolFinished(msgspec.Struct, frozen=True, tag="tool_finished"):
    call_id: str
    name: str
    status: ToolStatus
    content: str


class ArtifactWritten(msgspec.Struct, frozen=True, tag="artifact_written"):
    """A workspace tool created or changed a file; its bytes are in the artifact store,
    served by the gateway under its sha256."""

    call_id: str
    path: str
    """Relative to the agent's workspace."""
    size: int
    sha256: str


class ChildSpawned(msgspec.Struct, frozen=True, tag="child_spawned"):
    call_id: str
    child: str
    task: str
    kind: str = ""
    """The published kind the child runs, for a composition's stage; empty for a helper
    that runs its parent's spec."""
    stage: str = ""
    """The composition's name for the stage (`stage 2: writer`, `branch 1: fr`, `merge:
    editor`, `route: billing`, `pass 3: critic`)."""


class HandedOff(msgspec.Struct, frozen=True, tag="handed_off"):
    """A handoff composition passed the conversation to `kind`: the rest of the turn and
    the agent's next messages are that kind's."""

    from_kind: str
    kind: str
    version: int


class ChildReported(msgspec.Struct, frozen=True, tag="child_reported"):
    call_id: str
    child: str
    outcome: str
    reply: str


class Waiting(msgspec.Struct, frozen=True, tag="waiting"):
    pending: tuple[str, ...]


class ApprovalRequested(msgspec.Struct, frozen=True, tag="approval_requested"):
    """The model called an `ask` tool: the exact call waits for a person."""

    request_id: str
    call_id: str
    name: str
    arguments: dict[str, Any] = {}
    questions: dict[str, Question] = {}
    """When the call itself asks a person for input (an MCP server's input-required
    result): what it asks, per key; the answer gives `answers` for them."""
    page: bool = False
    """The call runs in the page: an open page of the conversation claims it
    (`page_call_claimed`), runs it and posts its result; no person approves it."""


class PageCallClaimed(msgspec.Struct, frozen=True, tag="page_call_claimed"):
    """A page claimed a request that runs in the page: it alone runs it and posts its
    result; if its stream closes first, the call's outcome is unknown."""

    request_id: str
    page: str


class ApprovalAnswered(msgspec.Struct, frozen=True, tag="approval_answered"):
    request_id: str
    approve: bool
    note: str = ""
    by: str = ""
    answers: dict[str, dict[str, Any]] = {}


class ApprovalAbandoned(msgspec.Struct, frozen=True, tag="approval_abandoned"):
    """A newer message superseded the turn; the call never ran, its outcome is unknown."""

    request_id: str
    outcome: Literal["unknown"] = "unknown"


class ApprovalRefused(msgspec.Struct, frozen=True, tag="approval_refused"):
    """An answer that changed nothing: the request was answered already (this answer came
    second), is not one the agent asked, its turn ended before the answer arrived, its
    answers do not fit the questions (the request still waits for a fitting one), or
    (`other_page`) a page's claim or result of a request another page claimed, or that no
    page claimed."""

    request_id: str
    reason: Literal[
        "already_answered", "unknown_request", "turn_ended", "wrong_answer", "other_page"
    ]
    approve: bool
    by: str = ""
    message: str = ""
    """One sentence saying why."""


class StopRefused(msgspec.Struct, frozen=True, tag="stop_refused"):
    """A stop that changed nothing: no turn was in progress when it arrived, or it named
    a turn that was not the one in progress."""

    reason: Literal["no_turn", "other_turn"] = "no_turn"
    """`other_turn`: the stop named a turn, and another one is in progress."""
    message: str = ""


class TurnParked(msgspec.Struct, frozen=True, tag="turn_parked"):
    """No answer came in time. The turn keeps its place and resumes on an answer."""

    request_id: str


class AgentPaused(msgspec.Struct, frozen=True, tag="agent_paused"):
    """The agent holds: nothing runs until it is resumed (a running turn stopped at a
    round boundary and keeps its place)."""

    by: str = ""


class AgentResumed(msgspec.Struct, frozen=True, tag="agent_resumed"):
    """The agent runs again: its held turn goes on, then what arrived while paused."""

    by: str = ""


class AgentForked(msgspec.Struct, frozen=True, tag="agent_forked"):
    """The agent began as a fork: the events before this one are `source`'s first `seq`
    (the same seqs, turns and times), and what follows is its own. A turn cut by the fork
    is on the timeline but not in the fork's history: the fork starts idle."""

    source: str
    seq: int
    by: str = ""
    """Who forked it: the key's id and name, as approvals show them."""


FailedBy = Literal["", "turn", "step"]


class TurnEnded(msgspec.Struct, frozen=True, tag="turn_ended"):
    outcome: Outcome
    reply: str = ""
    reason: str = ""
    """For a failed or stopped turn: one sentence saying what happened."""
    usage: Usage = Usage()
    """Model tokens the turn used, summed over its finished model calls."""
    failed_by: FailedBy = ""
    """For a failed turn, what failed: `turn`, the turn could not reach a reply within what
    it may do (its rounds, its budgets, its harness gave up); `step`, a step it needed
    could not be run (its model, after every fallback; its spec; a check of the policy
    pipeline). Empty for the other endings, and on turns recorded before it was kept."""


EventBody = (
    TurnStarted
    | MessageQueued
    | MessageSteered
    | MessageRejected
    | ModelMessage
    | ModelFallback
    | ToolCalled
    | ToolFinished
    | ArtifactWritten
    | ChildSpawned
    | ChildReported
    | HandedOff
    | Waiting
    | ApprovalRequested
    | PageCallClaimed
    | ApprovalAnswered
    | ApprovalAbandoned
    | ApprovalRefused
    | StopRefused
    | TurnParked
    | AgentPaused
    | AgentResumed
    | AgentForked
    | TurnEnded
    | ContextFolded
    | MemoriesExtracted
    | ScheduleFired
    | ScheduleSkipped
)

BODY_TAGS: dict[type, str] = {body: str(body.__struct_config__.tag) for body in get_args(EventBody)}
"""Each body type's tag: `type` in its JSON."""


class Event(msgspec.Struct, frozen=True):
    agent: str
    seq: int
    """Per agent: starts at 1, never repeats, never skips."""
    turn: int
    round: int
    at: datetime
    """When the event was recorded, taken from the Restate context."""
    body: EventBody


class TimelineQuery(msgspec.Struct, frozen=True):
    after_seq: int = 0
    limit: int = 100


class TimelinePage(msgspec.Struct, frozen=True):
    events: tuple[Event, ...]
    last_seq: int
    """The agent's newest seq, so a reader knows whether more is there."""


AgentState = Literal["idle", "running", "waiting", "parked", "paused"]


class AgentStatus(msgspec.Struct, frozen=True):
    address: str
    state: AgentState
    turn: int = 0
    last_seq: int = 0
    last_outcome: Outcome | None = None
    queued: int = 0
    tokens_day: str = ""
    """The UTC day `tokens_used` counts (the day of the agent's last model call)."""
    tokens_used: int = 0
    """Model tokens charged to the agent on `tokens_day`, the call in flight excluded."""


class WakeResult(msgspec.Struct, frozen=True):
    """What the `wake` handler answers once the wake's work is done."""

    status: AgentStatus
    reply: str = ""
    """The final reply, when this wake ended a turn that succeeded."""
    note: str = ""
    """Anything else the sender should know, e.g. that there was nothing to stop."""


class StopAnswer(msgspec.Struct, frozen=True):
    stopping: bool
    """False when there was nothing to stop."""
    message: str


class Approvals(msgspec.Struct, frozen=True):
    """The approval request an agent waits on, if any, and the ones answered lately."""

    pending: str | None = None
    answered: tuple[str, ...] = ()
