"""Following the turn one message starts, on a recorded timeline: the follower is given
the timeline's items as they were recorded, and what `follow_turn` yields is checked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from a2a.types import TaskState

from schemas.events import (
    Event,
    EventBody,
    MessageQueued,
    MessageRejected,
    ModelMessage,
    TurnEnded,
    TurnStarted,
)
from services.gateway import mcp_tasks, service
from services.gateway.a2a_tasks import TurnStream, task, view_of
from services.gateway.auth import Owned
from services.gateway.runtime import Runtime
from services.gateway.turns import TurnItem, follow_turn

AGENT = "acme.helper"
MESSAGE = "m1"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
SENTENCE = "A turn was in progress, and the message asked to be rejected then: it ran nothing."


def _event(seq: int, body: EventBody, turn: int = 1, round_: int = 1) -> Event:
    return Event(AGENT, seq, turn, round_, T0 + timedelta(seconds=seq), body)


OTHER = _event(1, TurnStarted("first", "helper", 1, message_id="m0"))
QUEUED = _event(2, MessageQueued("hello", MESSAGE))
WORKED = _event(3, ModelMessage("script", "busy"))
REJECTED = _event(4, MessageRejected("hello", MESSAGE, SENTENCE))


def _followed(monkeypatch: pytest.MonkeyPatch, timeline: list[TurnItem | str]) -> list[TurnItem]:
    """What `follow_turn` yields for MESSAGE when the timeline is `timeline` (then
    nothing more, as a follower that waits on: a follower that is not done times out)."""

    async def recorded(rt: Any, agent: Any, after: int) -> AsyncGenerator[TurnItem | str]:
        for item in timeline:
            yield item
        await asyncio.Event().wait()

    monkeypatch.setattr(service, "follow", recorded)

    async def run() -> list[TurnItem]:
        async with asyncio.timeout(5):
            following = follow_turn(cast(Runtime, None), cast(Owned, None), 0, MESSAGE)
            return [item async for item in following]

    return asyncio.run(run())


def test_a_rejected_message_yields_its_rejection_and_ends_the_follow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeline: list[TurnItem | str] = [OTHER, QUEUED, "keepalive", WORKED, REJECTED]
    assert _followed(monkeypatch, timeline) == [QUEUED, REJECTED]


def test_another_messages_rejection_is_not_the_followed_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    theirs = _event(2, MessageRejected("other", "m9", SENTENCE))
    started = _event(3, TurnStarted("hello", "helper", 1, message_id=MESSAGE), turn=2)
    ended = _event(4, TurnEnded("succeeded", reply="hi"), turn=2)
    timeline: list[TurnItem | str] = [OTHER, theirs, started, ended]
    assert _followed(monkeypatch, timeline) == [started, ended]


def test_a_rejected_message_is_an_mcp_task_that_ended_with_a_tool_error() -> None:
    view = mcp_tasks.task_view(AGENT, MESSAGE, [QUEUED, REJECTED])
    assert (view.status, view.message) == ("completed", SENTENCE)
    assert view.status in mcp_tasks.TERMINAL
    result = mcp_tasks.view_result(view)
    assert result is not None
    assert result.is_error
    assert [c.text for c in result.content if c.type == "text"] == [SENTENCE]
    shown = mcp_tasks.modern_task(view, detailed=True)
    assert shown["result"]["isError"] is True
    assert "error" not in shown


def test_a_rejected_message_is_a_rejected_a2a_task_with_the_sentence() -> None:
    view = view_of(AGENT, MESSAGE, [REJECTED])
    assert view is not None
    found = task(view, [REJECTED], (), history=True)
    assert found.status.state == TaskState.TASK_STATE_REJECTED
    assert [p.text for p in found.status.message.parts] == [SENTENCE]
    assert [m.parts[0].text for m in found.history] == ["hello"]

    stream = TurnStream(AGENT, MESSAGE, [])
    stream.take(QUEUED)
    assert not stream.done()
    (update,) = stream.take(REJECTED)
    assert update.status.state == TaskState.TASK_STATE_REJECTED
    assert stream.done()
