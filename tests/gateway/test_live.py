"""Live deltas: appended without repeats, gaps ignored, retracted on a new attempt, and
superseded by the recorded message."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import Event, ModelMessage, TurnStarted
from schemas.live import LiveBatch, LiveDelta, Retraction
from services.gateway.feeds import Follower
from services.gateway.live import LiveRounds, LiveView
from tests.gateway.conftest import LIVE_TOKEN, T0, World, make_world, timeline
from tests.gateway.streaming import Frame, SseReader

AGENT = "acme.alpha"  # its turns 1 and 2 are recorded; turn 3 is live here


def delta(offset: int, text: str, attempt: str = "a", round_: int = 1) -> LiveDelta:
    return LiveDelta(AGENT, 3, round_, attempt, offset, text)


# --- the pure state ----------------------------------------------------------------------


def test_a_round_appends_only_what_is_new_and_ignores_a_gap() -> None:
    rounds = LiveRounds(AGENT)
    assert rounds.apply(delta(0, "Hel"), 0) == [delta(0, "Hel")]
    assert rounds.apply(delta(10, "gap"), 0) == []
    assert rounds.apply(delta(0, "Hel"), 0) == []
    assert rounds.apply(delta(1, "ello"), 0) == [delta(3, "lo")]
    assert rounds.snapshot() == [delta(0, "Hello")]


def test_what_a_round_holds_is_where_the_next_push_goes_on_from() -> None:
    rounds = LiveRounds(AGENT)
    rounds.apply(delta(0, "Hel"), 0)
    assert rounds.held(delta(0, "Hel")) == 3
    gap = delta(10, "gap")
    assert rounds.apply(gap, 0) == []
    assert rounds.held(gap) == 3, "after a gap: go on from what is held"
    rounds.apply(delta(0, "new", "b"), 0)
    assert rounds.held(delta(3, "lo", "a")) == 5, "a taken-back attempt: nothing more wanted"
    rounds.supersede((3, 1))
    done = delta(3, " more", "b")
    assert rounds.apply(done, 0) == []
    assert rounds.held(done) == 8, "a recorded round: nothing more wanted"


def test_a_new_attempt_retracts_and_the_old_one_is_ignored_from_then_on() -> None:
    rounds = LiveRounds(AGENT)
    rounds.apply(delta(0, "abc", "a"), 0)
    assert rounds.apply(delta(0, "xy", "b"), 0) == [
        Retraction(AGENT, 3, 1),
        delta(0, "xy", "b"),
    ]
    assert rounds.apply(delta(3, "def", "a"), 0) == []
    assert rounds.snapshot() == [delta(0, "xy", "b")]


def test_a_recorded_round_is_forgotten_and_later_deltas_of_it_are_ignored() -> None:
    rounds = LiveRounds(AGENT)
    rounds.apply(delta(0, "one", round_=1), 0)
    rounds.apply(delta(0, "two", round_=2), 0)
    rounds.supersede((3, 1))
    assert rounds.snapshot() == [delta(0, "two", round_=2)]
    assert rounds.apply(delta(3, " more", round_=1), 0) == []
    rounds.expire(now=1000, ttl=10)
    assert not rounds


def test_a_view_keeps_one_followers_stream_contiguous() -> None:
    view = LiveView()
    assert view.show(delta(0, "Hello")) == [delta(0, "Hello")]
    assert view.show(delta(3, "lo world")) == [delta(5, " world")]
    assert view.show(delta(20, "far")) == []
    assert view.show(delta(0, "new", "b")) == [Retraction(AGENT, 3, 1), delta(0, "new", "b")]
    view.recorded(Event(AGENT, 20, 3, 1, T0, ModelMessage("script", "new text")))
    assert view.show(delta(3, " more", "b")) == []


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(min_size=1, max_size=60),
    cuts=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=30),
)
def test_whatever_pieces_arrive_followers_see_a_prefix_then_the_whole_text(
    text: str, cuts: list[tuple[int, int]]
) -> None:
    """Pieces may repeat, overlap, come out of order or leave gaps; the executor's last
    re-send covers everything from an acknowledged offset (here, from 0)."""
    rounds = LiveRounds(AGENT)
    shown = ""
    pieces = [delta(min(a, b), text[min(a, b) : max(a, b)]) for a, b in cuts]
    for piece in [*pieces, delta(0, text)]:
        for item in rounds.apply(piece, 0):
            assert isinstance(item, LiveDelta)
            assert item.offset == len(shown)
            shown += item.text
        assert text.startswith(shown)
    assert shown == text


def test_a_follower_that_falls_behind_is_told_and_keeps_what_came_after() -> None:
    async def run() -> None:
        follower = Follower(AGENT, limit=3)
        for index in range(5):
            follower.push(delta(index, "x"))
        assert await follower.next(0.1) == "lagged"
        assert await follower.next(0.1) == delta(4, "x")
        assert await follower.next(0.01) == "idle"
        follower.close()
        assert await follower.next(0.1) == "closed"

    asyncio.run(run())


# --- through HTTP ------------------------------------------------------------------------

LIVE = {"X-Teaspill-Live-Token": LIVE_TOKEN}


async def push(world: World, *deltas: LiveDelta) -> dict[str, Any]:
    body = msgspec.json.encode(LiveBatch(deltas))
    response = await world.client.post("/internal/live", content=body, headers=LIVE)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@contextlib.asynccontextmanager
async def follow(world: World, after: int = 12) -> AsyncIterator[httpx.Response]:
    request = world.streams.build_request(
        "GET", f"/v1/agents/{AGENT}/events?after={after}", headers=world.auth("read")
    )
    response = await world.streams.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


def live(frames: list[Frame]) -> list[tuple[str, dict[str, object]]]:
    return [
        (f.event, msgspec.json.decode(f.data)) for f in frames if f.event in ("delta", "retract")
    ]


def text_of(frames: list[Frame]) -> str:
    return "".join(str(data["text"]) for name, data in live(frames) if name == "delta")


def has(event: str, count: int = 1) -> Callable[[list[Frame]], bool]:
    return lambda frames: sum(f.event == event for f in frames) >= count


async def registered(response: httpx.Response) -> SseReader:
    """A reader, once the follower has replayed and waits (its first keepalive)."""
    reader = SseReader(response)
    await reader.until(has(""))
    return reader


@pytest.mark.anyio
async def test_deltas_reach_followers_trimmed_with_gaps_ignored(world: World) -> None:
    async with follow(world) as response:
        reader = await registered(response)
        answers = [
            await push(world, delta(0, "Hel")),
            await push(world, delta(10, "gap")),
            await push(world, delta(0, "Hello"), delta(3, "lo, wor")),
            await push(world, delta(10, "ld")),
        ]
        frames = await reader.until(has("delta", 4))
    assert text_of(frames) == "Hello, world"
    assert [(d["offset"], d["text"]) for _, d in live(frames)] == [
        (0, "Hel"),
        (3, "lo"),
        (5, ", wor"),
        (10, "ld"),
    ]
    assert [answer["held"] for answer in answers] == [[3], [3], [5, 10], [12]], (
        "a gap is answered with what the gateway holds, for the executor to go on from"
    )
    assert [a["fresh"] for a in answers] == [1, 0, 2, 1]
    assert all(f.id is None for f in frames if f.event == "delta")


@pytest.mark.anyio
async def test_a_new_attempt_is_retracted_before_its_deltas(world: World) -> None:
    async with follow(world) as response:
        reader = await registered(response)
        await push(world, delta(0, "first try", "a"))
        await push(world, delta(0, "second", "b"), delta(9, " late", "a"))
        frames = await reader.until(has("delta", 2))
    assert live(frames) == [
        ("delta", msgspec.to_builtins(delta(0, "first try", "a"))),
        ("retract", {"agent": AGENT, "turn": 3, "round": 1}),
        ("delta", msgspec.to_builtins(delta(0, "second", "b"))),
    ]


@pytest.mark.anyio
async def test_a_follower_joining_mid_round_gets_the_text_so_far_in_one_delta(
    world: World,
) -> None:
    await push(world, delta(0, "Hello"), delta(5, ", world"))
    async with follow(world) as response:
        reader = SseReader(response)
        first = await reader.until(has("delta"))
        await push(world, delta(12, "!"))
        rest = await reader.until(has("delta"))
    assert [(d["offset"], d["text"]) for _, d in live(first + rest)] == [
        (0, "Hello, world"),
        (12, "!"),
    ]


@pytest.mark.anyio
async def test_the_recorded_message_supersedes_the_deltas(world: World) -> None:
    async with follow(world) as response:
        reader = await registered(response)
        await push(world, delta(0, "It is"))
        await reader.until(has("delta"))
        await world.record(
            [
                Event(AGENT, 13, 3, 1, T0, TurnStarted("q", "helper", 1)),
                Event(AGENT, 14, 3, 1, T0, ModelMessage("script", "It is 42")),
            ]
        )
        # The feed supersedes the round before it passes the message on.
        frames = await reader.until(has("model_message"))
        late = await push(world, delta(5, " 42"))
        await push(world, delta(0, "Next round", round_=2))
        frames += await reader.until(has("delta"))
    assert late["fresh"] == 0
    assert late["held"] == [8], "a recorded round wants no more: all of it is taken as held"
    assert [f.event for f in frames if f.event != ""] == ["turn_started", "model_message", "delta"]
    assert live(frames) == [("delta", msgspec.to_builtins(delta(0, "Next round", round_=2)))]
    hub = world.app.state.runtime.hub
    assert hub.snapshot(AGENT) == [delta(0, "Next round", round_=2)]


@pytest.mark.anyio
async def test_a_reconnecting_follower_gets_recorded_events_then_the_live_tail(
    world: World,
) -> None:
    await world.record([Event(AGENT, 13, 3, 1, T0, TurnStarted("q", "helper", 1))])
    async with follow(world) as response:
        reader = SseReader(response)
        frames = await reader.until(has("turn_started"))
        await push(world, delta(0, "partial"))
        frames += await reader.until(has("delta"))
    await push(world, delta(7, " answer"))
    last = [f.id for f in frames if f.id is not None][-1]
    async with follow(world, after=int(last or 0)) as response:
        reader = SseReader(response)
        again = await reader.until(has("delta"))
        await push(world, delta(14, "!"))
        again += await reader.until(has("delta"))
    assert [(d["offset"], d["text"]) for _, d in live(again)] == [
        (0, "partial answer"),
        (14, "!"),
    ]
    assert all(f.event in ("delta", "") for f in again)


@pytest.mark.anyio
async def test_a_follower_that_falls_behind_catches_up_from_the_projection(
    tmp_path: Path,
) -> None:
    """A queue of 5: forty events and twenty deltas at once overflow it."""
    async with make_world(tmp_path, queue_limit=5) as world, follow(world) as response:
        reader = SseReader(response)
        await reader.until(has(""))  # a keepalive: the follower is registered
        await world.record(timeline(AGENT, 6, first_seq=13, first_turn=3))  # 13..48
        pieces = [LiveDelta(AGENT, 10, 1, "a", i, "abcdefghijklmnopqrst"[i]) for i in range(20)]
        await push(world, *pieces)
        frames = await reader.until(
            lambda fs: text_of(fs) == "abcdefghijklmnopqrst" and 48 in seqs(fs)
        )
    assert seqs(frames) == list(range(13, 49))
    offsets = [(int(str(d["offset"])), len(str(d["text"]))) for _, d in live(frames)]
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(offsets))


def seqs(frames: list[Frame]) -> list[int]:
    return [int(f.id) for f in frames if f.id is not None]
