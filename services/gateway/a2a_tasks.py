"""A2A tasks made from the timeline: a task is one turn of one agent, its context the
agent's address. Pure: no I/O.

A task is the same thing the MCP server calls a task (`mcp_tasks`): its id is the agent's
address and the id of the message that starts the turn (`address/message_id`), and its
state is read from what the timeline records of that message, so any gateway process
answers for any task and nothing of a task lives in a gateway's memory. Each round that
wrote text is an artifact `round-N` (the last one is the reply); the message that started
the turn is the task's history; the status carries the reply, or the sentence that says
why there is none.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.server.events import Event as StreamEvent
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from schemas.events import (
    Event,
    MessageQueued,
    MessageRejected,
    ModelMessage,
    TurnEnded,
    TurnStarted,
)
from schemas.live import LiveDelta, Retraction
from services.gateway.mcp_tasks import TaskView, UnknownTaskError, rejection, task_id, task_view
from services.gateway.turns import TurnItem

ENDED: dict[str, TaskState] = {
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "stopped": TaskState.TASK_STATE_CANCELED,
    "superseded": TaskState.TASK_STATE_CANCELED,
    "failed": TaskState.TASK_STATE_FAILED,
    "parked": TaskState.TASK_STATE_INPUT_REQUIRED,
}
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def task(view: TaskView, story: Sequence[Event], turn: Sequence[Event], history: bool) -> Task:
    """The task `view` reads from `story` (`ProjectionStore.message_story`), with the
    artifacts of its `turn`'s events; `history`: with the message that started it."""
    found = Task(id=view.task_id, context_id=view.address, status=status(view))
    if history:
        found.history.extend(_message(view, e) for e in story if _names(e, view))
    found.artifacts.extend(artifacts(turn))
    return found


def state(view: TaskView) -> TaskState:
    if view.ending is not None and isinstance(view.ending.body, MessageRejected):
        return TaskState.TASK_STATE_REJECTED
    if view.started is None:
        return TaskState.TASK_STATE_SUBMITTED
    if view.ending is not None and isinstance(view.ending.body, TurnEnded):
        return ENDED[view.ending.body.outcome]
    if view.asked:
        return TaskState.TASK_STATE_INPUT_REQUIRED
    return TaskState.TASK_STATE_WORKING


def status(view: TaskView) -> TaskStatus:
    """The state, when it last changed, and what the agent says of it: the reply, why the
    turn ended otherwise, why the agent refused the message, whose approval it waits for, or
    that it waits behind another turn."""
    now = state(view)
    found = TaskStatus(state=now, timestamp=view.updated_at)
    sentence = _sentence(view, now)
    if sentence:
        found.message.CopyFrom(_agent_says(view, "status", sentence))
    return found


def _sentence(view: TaskView, now: TaskState) -> str:
    body = view.ending.body if view.ending is not None else None
    if isinstance(body, TurnEnded):
        return body.reply if body.outcome == "succeeded" else body.reason or view.message
    if isinstance(body, MessageRejected):
        return rejection(view.address, body)
    if now == TaskState.TASK_STATE_INPUT_REQUIRED:
        request = view.asked[0].request_id
        return (
            f"the turn of agent {view.address} waits for a person to answer approval request "
            f"{request}: answer it with POST /v1/agents/{view.address}/approvals/{request}"
        )
    return view.message if now == TaskState.TASK_STATE_SUBMITTED else ""


def artifacts(turn: Sequence[Event]) -> list[Artifact]:
    return [
        _artifact(e.round, e.body.text)
        for e in turn
        if isinstance(e.body, ModelMessage) and e.body.text
    ]


def _names(event: Event, view: TaskView) -> bool:
    body = event.body
    return isinstance(
        body, TurnStarted | MessageQueued | MessageRejected
    ) and view.task_id.endswith(f"/{body.message_id}")


def _message(view: TaskView, event: Event) -> Message:
    body = event.body
    text = body.text if isinstance(body, TurnStarted | MessageQueued | MessageRejected) else ""
    return Message(
        message_id=view.task_id.rpartition("/")[2],
        context_id=view.address,
        task_id=view.task_id,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
    )


def _agent_says(view: TaskView, name: str, text: str) -> Message:
    return Message(
        message_id=f"{view.task_id}.{name}",
        context_id=view.address,
        task_id=view.task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def _artifact(round_: int, text: str) -> Artifact:
    return Artifact(artifact_id=f"round-{round_}", name=f"round {round_}", parts=[Part(text=text)])


def view_of(address: str, message_id: str, story: Sequence[Event]) -> TaskView | None:
    """The task as `story` shows it; None while the timeline does not name its message."""
    try:
        return task_view(address, message_id, list(story))
    except UnknownTaskError:
        return None


class TurnStream:
    """One task as A2A stream events: the task as it stands when the stream begins, each
    round's text as it is written (its live text appended to the round's artifact, the
    recorded text completing it), and a status update whenever the state changes."""

    def __init__(self, address: str, message_id: str, story: Sequence[Event]) -> None:
        self.address = address
        self.message_id = message_id
        self.task_id = task_id(address, message_id)
        self.view = view_of(address, message_id, story)
        self.events: list[Event] = []
        self._story = story
        self._shown: dict[int, str] = {}
        """Each open round's live text so far, as this stream sent it."""
        self._state = state(self.view) if self.view else TaskState.TASK_STATE_SUBMITTED

    def first(self) -> Task:
        if self.view is None:
            submitted = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            return Task(id=self.task_id, context_id=self.address, status=submitted)
        return task(self.view, self._story, (), history=True)

    def done(self) -> bool:
        """Nothing more comes until a person acts: the turn ended, or waits for an answer."""
        return self._state in TERMINAL or self._state == TaskState.TASK_STATE_INPUT_REQUIRED

    def take(self, item: TurnItem) -> list[StreamEvent]:
        if isinstance(item, LiveDelta):
            return [self._live(item.round, item.text)]
        if isinstance(item, Retraction):
            self._shown.pop(item.round, None)
            return []
        self.events.append(item)
        sent: list[StreamEvent] = []
        body = item.body
        if isinstance(body, ModelMessage) and (body.text or item.round in self._shown):
            sent.append(self._recorded(item.round, body.text))
        self.view = view_of(self.address, self.message_id, self.events)
        if self.view is not None and state(self.view) != self._state:
            self._state = state(self.view)
            sent.append(self._status(self.view))
        return sent

    def _live(self, round_: int, text: str) -> TaskArtifactUpdateEvent:
        """A piece of the round's live text: the first starts the artifact, the rest
        append to it (a retraction starts it again)."""
        shown = self._shown.get(round_)
        self._shown[round_] = (shown or "") + text
        return self._chunk(round_, text, append=shown is not None, last=False)

    def _recorded(self, round_: int, text: str) -> TaskArtifactUpdateEvent:
        """The round's recorded text, the last chunk: what the live text did not show yet,
        or all of it, replacing the live text, when that was not its beginning."""
        shown = self._shown.pop(round_, None)
        if shown is not None and text.startswith(shown):
            return self._chunk(round_, text[len(shown) :], append=True, last=True)
        return self._chunk(round_, text, append=False, last=True)

    def _chunk(
        self, round_: int, text: str, *, append: bool, last: bool
    ) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.address,
            artifact=_artifact(round_, text),
            append=append,
            last_chunk=last,
        )

    def _status(self, view: TaskView) -> TaskStatusUpdateEvent:
        return TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.address, status=status(view)
        )
