"""The harness protocol: commands the harness yields, results the driver sends back,
and the turn state that survives between wakes."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from schemas.chat import ChatMessage, ToolCall, ToolDefinition
from schemas.context import ContextState, FoldBlock
from schemas.memory import MemoryRecord
from schemas.model import ModelReply, ModelRequest, Usage
from schemas.questions import InputAnswer, InputAsked
from schemas.spec import AgentSpec
from schemas.wake import ChildReport, ParentRef

# --- commands -----------------------------------------------------------------------


class CallModel(msgspec.Struct, frozen=True, tag="call_model"):
    request: ModelRequest
    fingerprint: str = ""
    """sha256 of the prompt's instructions and tool definitions (layer 0)."""
    folds_fingerprint: str = ""
    """sha256 of layer 0 and the fold summaries after it (layer 1)."""
    prompt_chars: int = 0
    """Characters the request's messages and tools take."""
    memories: tuple[str, ...] = ()
    """Ids of the memory records the prompt shows."""


class Summarize(msgspec.Struct, frozen=True, tag="summarize"):
    """Write the summary of turns about to be folded: a journaled model step. A step that
    fails is answered with `Summary(problem=...)`, never with an error."""

    request: ModelRequest


class RecordFold(msgspec.Struct, frozen=True, tag="record_fold"):
    """A fold was made: record it on the timeline and keep `context` for later wakes."""

    block: FoldBlock
    context: ContextState
    tokens_before: int
    tokens_after: int
    model: str
    """The model that wrote the summary; empty when it is extractive."""
    reason: str = ""
    """Why the summary is extractive, when it is."""


class Recall(msgspec.Struct, frozen=True, tag="recall"):
    """The built-in `recall` tool: read the original messages of earlier turns from the
    history (the current turn's are handed in)."""

    call: ToolCall
    turn: int
    current: tuple[ChatMessage, ...]
    """The current turn's messages so far (not in the history yet)."""


class CallTool(msgspec.Struct, frozen=True, tag="call_tool"):
    call: ToolCall
    idempotency_key: str
    """Agent, turn and call id: a side-effecting tool runs at most once per key."""
    answer: InputAnswer | None = None
    """The call again, with a person's answer to what it asked (`ToolResult.asked`)."""


class Spawn(msgspec.Struct, frozen=True, tag="spawn"):
    call: ToolCall
    child: str
    task: str
    depth: int
    spec: AgentSpec
    """The child's spec: the parent's, with grants never wider (unused with `kind`)."""
    budget: int = 0
    """The child's share of the message's agents: what it and its descendants may still
    bring into being."""
    kind: str = ""
    """A published kind the child runs instead (a composition's stage): its newest spec."""
    stage: str = ""
    """The composition's name for the stage (`stage 2: writer`), shown on the timeline."""
    tokens: int | None = None
    """The model tokens the child's turn may use at most (a composition's share of what it
    has left); None for its spec's own limit alone."""


class HandOff(msgspec.Struct, frozen=True, tag="hand_off"):
    """The agent goes on as `kind` (its newest published spec): the rest of this turn and
    the next messages are that kind's."""

    kind: str


class Refuse(msgspec.Struct, frozen=True, tag="refuse"):
    """A call the harness will not run (unknown or ungranted tool); it is recorded."""

    call: ToolCall
    reason: str


class AskApproval(msgspec.Struct, frozen=True, tag="ask_approval"):
    """End the wake until a person approves or denies `call`."""

    request_id: str
    call: ToolCall
    asked: InputAsked | None = None
    """What the call asks a person (an MCP server's input-required result); None for an
    `ask` tool's approval."""
    page: bool = False
    """The call runs in the page (a tool the page declared): it waits for a page to claim
    it and post its result, not for a person's approval."""


class Told(msgspec.Struct, frozen=True, tag="told"):
    """A built-in tool the harness answered itself (`ask_user`, with a person's answer):
    the driver records the call and its result."""

    call: ToolCall
    content: str
    status: ToolStatus = "ok"
    shown: bool = False
    """The call was recorded when it was asked (a page's call): only its result is."""


class Wait(msgspec.Struct, frozen=True, tag="wait"):
    """End the wake; the turn continues when every pending child has reported."""

    pending: tuple[str, ...]


class Between(msgspec.Struct, frozen=True, tag="between"):
    """A round has ended (its model call and its tool calls): the driver answers with
    what arrived for the running turn meanwhile (`Arrived`), or `Ack` for nothing."""


class Reply(msgspec.Struct, frozen=True, tag="reply"):
    """The turn succeeded with this final text."""

    text: str


class Fail(msgspec.Struct, frozen=True, tag="fail"):
    """The turn failed; `reason` is one sentence for a person."""

    reason: str


Command = (
    CallModel
    | Summarize
    | RecordFold
    | Recall
    | CallTool
    | Spawn
    | HandOff
    | Refuse
    | AskApproval
    | Told
    | Wait
    | Between
    | Reply
    | Fail
)

# --- results ------------------------------------------------------------------------

ToolStatus = Literal["ok", "error", "unknown"]


class Artifact(msgspec.Struct, frozen=True):
    path: str
    """Relative to the workspace; for what an MCP tool answered,
    `mcp/SERVER/tTURN-rROUND-CALL/N-NAME`."""
    size: int
    sha256: str
    """Hex digest of the content: its name in the content-addressed store."""


class ToolResult(msgspec.Struct, frozen=True, tag="tool_result"):
    call_id: str
    name: str
    status: ToolStatus
    """`unknown`: the process died while the tool ran, and it is not run again."""
    content: str
    started: float = 0
    finished: float = 0
    """Unix seconds the step began and ended, taken inside the journaled step (so a replay
    gives the same): the times of the events around it."""
    artifacts: tuple[Artifact, ...] = ()
    """What the call answered that is not text (an MCP tool's images, audio, binary
    resources), kept in the artifact store; the content names each by its sha256."""
    asked: InputAsked | None = None
    """The call needs a person's input before it can finish: the turn parks on it as on
    an approval, and the answer sends the call again (`CallTool.answer`)."""


class Spawned(msgspec.Struct, frozen=True, tag="spawned"):
    child: str
    problem: str = ""
    """Why the child was not brought into being (the driver recorded the refusal), if
    it was not: the sentence the model reads."""


class Handover(msgspec.Struct, frozen=True, tag="handover"):
    """The answer to `HandOff`: the kind's newest spec; None when it is not published."""

    spec: AgentSpec | None = None


class Ack(msgspec.Struct, frozen=True, tag="ack"):
    pass


class Summary(msgspec.Struct, frozen=True, tag="summary"):
    """The answer to `Summarize`: the model's reply, or why there is none."""

    reply: ModelReply | None = None
    problem: str = ""


class Arrived(msgspec.Struct, frozen=True, tag="arrived"):
    """The answer to `Between`: messages that joined the running turn (the next round
    shows them), and whether a pause holds the turn here."""

    messages: tuple[ChatMessage, ...] = ()
    hold: bool = False


Result = ModelReply | ToolResult | Spawned | Handover | Ack | Summary | Arrived

# --- state --------------------------------------------------------------------------


class PendingChild(msgspec.Struct, frozen=True):
    address: str
    call_id: str


class PendingApproval(msgspec.Struct, frozen=True):
    request_id: str
    call: ToolCall
    answer: bool | None = None
    """None until a person answers; then True (approved) or False (denied)."""
    note: str = ""
    asked: InputAsked | None = None
    """What the call asks the person, when it is a tool's question rather than an `ask`
    tool's approval."""
    answers: dict[str, dict[str, Any]] = {}
    """The person's answers to `asked`."""
    page: bool = False
    """The call runs in the page: a page claims it and posts its result (`answer` is True
    once the result, or the news that the claiming page closed, arrived)."""
    claimed: str = ""
    """The id of the page that claimed it; empty until one did."""
    result: str = ""
    """What the model reads of the page's run (with `answer` set)."""
    status: ToolStatus = "ok"
    """How the page's run went (`unknown`: the page closed before it sent a result)."""


class Running(msgspec.Struct, frozen=True, tag="running"):
    """The turn's rounds are in progress (or about to be resumed)."""


class AwaitingChildren(msgspec.Struct, frozen=True, tag="awaiting_children"):
    """The model called `wait`: the turn goes on when every pending child has reported."""


class AwaitingApproval(msgspec.Struct, frozen=True, tag="awaiting_approval"):
    """A call waits for a person's answer; the rest of its round waits behind it."""

    approval: PendingApproval
    remaining: tuple[ToolCall, ...] = ()
    """Calls of the round that come after the one waiting for approval."""
    parked: bool = False
    """It waited longer than the spec's approval timeout; it still resumes on an answer."""
    others: tuple[PendingApproval, ...] = ()
    """Questions asked at the same time (`ask_user` calls that follow one another in the
    round), each a request of its own: the turn goes on once every one is answered."""

    def requests(self) -> tuple[PendingApproval, ...]:
        """Every request the turn waits on here, the first one first."""
        return (self.approval, *self.others)

    def waiting(self) -> tuple[PendingApproval, ...]:
        """The requests not answered yet."""
        return tuple(r for r in self.requests() if r.answer is None)


Phase = Running | AwaitingChildren | AwaitingApproval
"""Where a turn stands between two wakes. One tagged value: a turn is in exactly one."""


class TurnState(msgspec.Struct, frozen=True):
    """Everything a turn needs to continue in a later wake."""

    number: int
    spec: AgentSpec
    """The spec the turn started with; a later publish affects the next turn only."""
    messages: tuple[ChatMessage, ...]
    """This turn's messages, starting with the user's."""
    round: int = 0
    phase: Phase = Running()
    pending: tuple[PendingChild, ...] = ()
    """Children spawned by this turn that have not reported yet (whatever the phase)."""
    spawned: int = 0
    parent: ParentRef | None = None
    depth: int = 0
    budget: int | None = None
    """The agents this turn and its descendants may still bring into being; None for the
    whole of the spec's `max_descendants` (a turn that has spawned nothing yet)."""
    active_seconds: float = 0
    """Time spent running in earlier wakes, for the wall-time budget."""
    usage: Usage = Usage()
    """Model tokens used so far, summed over finished model calls."""
    tokens: int | None = None
    """The model tokens this turn may use at most, beside its spec's `max_turn_tokens`: the
    share a composing parent gave it (`Message.tokens`); None for no share."""
    max_depth: int | None = None
    """How deep this turn's descendants may go at most, beside its spec's `max_depth`: its
    parent's bound (`Message.max_depth`), so a stage whose own spec allows more cannot
    nest past its root's; None for its spec's alone."""
    reports: tuple[ChildReport, ...] = ()
    """The reports of a composition's stages, as they arrived (kept only for a spec with a
    composition: the loop reads its children's replies from its messages)."""
    arrived: tuple[ChatMessage, ...] = ()
    """Messages that joined the turn (`while_busy: steer`) while it waited: the turn's
    next round adds them to its messages, after what it waited for."""
    memories: tuple[MemoryRecord, ...] = ()
    """The memory records shown to this turn, found once as it started (its prompt shows
    them after the fold summaries, so the stable prefix stays the same)."""
    page_tools: tuple[ToolDefinition, ...] = ()
    """The tools the page that sent the turn's message runs itself (`Message.page_tools`)."""
    user: str = ""
    """The end user whose message started the turn (`Message.user`), whose memory scope
    the turn's memory tools and prompt use; empty for a tenant-wide key's message."""
