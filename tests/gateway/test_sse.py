"""Following a timeline over SSE: replay, then live; every event once, in seq order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import httpx
import msgspec
import pytest

from tests.gateway.conftest import World, timeline
from tests.gateway.streaming import Frame, read_frames

pytestmark = pytest.mark.anyio


def recorded(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.id is not None]


def seqs(frames: list[Frame]) -> list[int]:
    return [int(f.id) for f in recorded(frames) if f.id is not None]


def upto(seq: int) -> Callable[[list[Frame]], bool]:
    return lambda frames: bool(seqs(frames)) and seqs(frames)[-1] >= seq


@contextlib.asynccontextmanager
async def follow(
    world: World, address: str, key: str = "read", **headers: str
) -> AsyncIterator[httpx.Response]:
    query = headers.pop("query", "")
    request = world.streams.build_request(
        "GET", f"/v1/agents/{address}/events{query}", headers={**world.auth(key), **headers}
    )
    response = await world.streams.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


async def test_a_replay_is_the_timeline_as_events(world: World) -> None:
    async with follow(world, "acme.alpha") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = await read_frames(response, upto(12))
    expected = await world.store.timeline("acme.alpha")
    assert recorded(frames) == [
        Frame(str(e.body.__struct_config__.tag), msgspec.json.encode(e).decode(), str(e.seq))
        for e in expected
    ]


async def test_last_event_id_wins_over_after(world: World) -> None:
    async with follow(world, "acme.alpha", query="?after=0", **{"Last-Event-ID": "9"}) as response:
        frames = await read_frames(response, upto(12))
    assert seqs(frames) == [10, 11, 12]


async def test_after_starts_the_replay(world: World) -> None:
    async with follow(world, "acme.alpha", query="?after=10") as response:
        frames = await read_frames(response, upto(12))
    assert seqs(frames) == [11, 12]


async def test_an_idle_stream_sends_keepalives(world: World) -> None:
    async with follow(world, "acme.alpha", query="?after=12") as response:
        frames = await read_frames(response, lambda fs: len(fs) >= 2, seconds=3)
    assert frames[:2] == [Frame(""), Frame("")]


async def test_new_events_stream_to_every_follower_once_in_order(world: World) -> None:
    more = timeline("acme.alpha", 3, first_seq=13, first_turn=3)  # seq 13..30
    async with contextlib.AsyncExitStack() as stack:
        responses = [
            await stack.enter_async_context(follow(world, "acme.alpha", query=f"?after={after}"))
            for after in (0, 6, 12)
        ]
        readers = [asyncio.create_task(read_frames(r, upto(30))) for r in responses]
        for index in range(0, len(more), 4):
            await world.record(more[index : index + 4])
            await asyncio.sleep(0.03)
        results = await asyncio.gather(*readers)
    for after, frames in zip((0, 6, 12), results, strict=True):
        assert seqs(frames) == list(range(after + 1, 31))


async def test_followers_joining_while_events_land_miss_nothing_and_repeat_nothing(
    world: World,
) -> None:
    more = timeline("acme.beta", 8, first_seq=7, first_turn=2)  # seq 7..54

    async def writer() -> None:
        for event in more:
            await world.record([event])
            await asyncio.sleep(0.002)

    async def late_follower(delay: float, after: int) -> list[int]:
        await asyncio.sleep(delay)
        async with follow(world, "acme.beta", query=f"?after={after}") as response:
            return seqs(await read_frames(response, upto(54)))

    writing = asyncio.create_task(writer())
    joins = [(i * 0.01, (i * 7) % 20) for i in range(12)]
    results = await asyncio.gather(*(late_follower(d, a) for d, a in joins))
    await writing
    for (_, after), got in zip(joins, results, strict=True):
        assert got == list(range(after + 1, 55))


async def test_a_follower_who_reconnects_with_last_event_id_gets_the_rest_once(
    world: World,
) -> None:
    more = timeline("acme.gamma", 2, first_seq=7, first_turn=2)  # seq 7..18
    seen: list[Frame] = []
    await world.record(more[:3])
    async with follow(world, "acme.gamma") as response:
        seen += recorded(await read_frames(response, upto(9)))
    await world.record(more[3:8])  # while nobody follows
    last = seen[-1].id
    assert last is not None
    async with follow(world, "acme.gamma", **{"Last-Event-ID": last}) as response:
        reader = asyncio.create_task(read_frames(response, upto(18)))
        await asyncio.sleep(0.05)
        await world.record(more[8:])
        seen += recorded(await reader)
    assert [int(f.id or 0) for f in seen] == list(range(1, 19))
    assert seen == [
        Frame(str(e.body.__struct_config__.tag), msgspec.json.encode(e).decode(), str(e.seq))
        for e in await world.store.timeline("acme.gamma")
    ]


async def test_a_new_agent_can_be_followed_before_its_first_event(world: World) -> None:
    sent = await world.client.post(
        "/v1/agents/acme.brandnew/messages",
        json={"text": "hi", "kind": "helper"},
        headers=world.auth("write"),
    )
    async with follow(world, "acme.brandnew", query="?after=0") as response:
        assert response.status_code == 200
        reader = asyncio.create_task(read_frames(response, upto(6)))
        await asyncio.sleep(0.05)
        await world.record(timeline("acme.brandnew", 1))
        frames = await reader
    assert sent.json()["events_url"] == "/v1/agents/acme.brandnew/events?after=0"
    assert seqs(frames) == [1, 2, 3, 4, 5, 6]


async def test_followers_leave_no_feed_behind(world: World) -> None:
    hub = world.app.state.runtime.hub
    async with follow(world, "acme.alpha") as response:
        await read_frames(response, upto(12))
        assert hub.feeds == 1
    for _ in range(100):
        if hub.feeds == 0:
            break
        await asyncio.sleep(0.02)
    assert hub.feeds == 0
