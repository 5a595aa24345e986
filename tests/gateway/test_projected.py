"""The projector tells the gateway of new events: followers get them at once, not at the
next poll, and a notice that does not arrive costs latency, never an event."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import msgspec
import psycopg
import pytest

from schemas.projection import Projected, ProjectedBatch
from services.gateway.listening import parsed
from services.projection.notify import NOTIFY_PATH, Notifier
from services.projection.projector import Projection
from tests.fixtures.postgres import Cluster
from tests.gateway.conftest import LIVE_TOKEN, World, make_world, settings_for, timeline
from tests.gateway.streaming import Frame, SseReader

pytestmark = pytest.mark.anyio
AGENT = "acme.alpha"
NOTICE = {"X-Teaspill-Notify-Token": LIVE_TOKEN}
NEVER = 600.0
"""A fallback poll interval no test waits for: what arrives came by a notice."""


@pytest.fixture
async def quiet(tmp_path: Path) -> AsyncIterator[World]:
    """A gateway that polls a followed agent only every ten minutes."""
    async with make_world(tmp_path, poll_interval=NEVER) as world:
        yield world


@contextlib.asynccontextmanager
async def following(world: World, after: int = 12) -> AsyncIterator[SseReader]:
    """A follower of AGENT that has replayed and waits (its first keepalive came)."""
    request = world.streams.build_request(
        "GET", f"/v1/agents/{AGENT}/events?after={after}", headers=world.auth("read")
    )
    response = await world.streams.send(request, stream=True)
    try:
        reader = SseReader(response)
        await reader.until(lambda frames: Frame("") in frames)
        yield reader
    finally:
        await response.aclose()


def seqs(frames: list[Frame]) -> list[int]:
    return [int(f.id) for f in frames if f.id is not None]


def reaches(seq: int) -> object:
    return lambda frames: seq in seqs(frames)


async def notify(world: World, *items: Projected) -> httpx.Response:
    body = msgspec.json.encode(ProjectedBatch(items))
    return await world.client.post(NOTIFY_PATH, content=body, headers=NOTICE)


async def test_the_projectors_notice_brings_new_events_to_a_follower(quiet: World) -> None:
    gateway = httpx.AsyncClient(transport=httpx.ASGITransport(quiet.app))
    notifier = Notifier(["http://gateway"], LIVE_TOKEN, gateway)
    projection = Projection(quiet.settings.home / "projection.db", notifier.tell)
    try:
        async with following(quiet) as reader:
            await projection.record(events=timeline(AGENT, 1, first_seq=13, first_turn=3))
            frames = await reader.until(lambda fs: 18 in seqs(fs), seconds=5)
    finally:
        await projection.close()
        await notifier.close()
        await gateway.aclose()
    assert seqs(frames) == [13, 14, 15, 16, 17, 18]


async def test_without_a_notice_nothing_arrives_until_one_comes(quiet: World) -> None:
    async with following(quiet) as reader:
        await quiet.record(timeline(AGENT, 1, first_seq=13, first_turn=3))
        waited = await reader.until(lambda fs: len(fs) >= 3, seconds=5)  # keepalives only
        assert seqs(waited) == []
        answer = await notify(quiet, Projected(AGENT, 18), Projected("acme.beta", 6))
        assert answer.json() == {"agents": 2, "followed": 1}
        frames = await reader.until(lambda fs: 18 in seqs(fs), seconds=5)
    assert seqs(frames) == [13, 14, 15, 16, 17, 18]


async def test_a_notice_that_overtakes_its_events_is_followed_by_the_next_one(
    quiet: World,
) -> None:
    """Notices may arrive in any order: a follower never skips a seq the projection lacks."""
    more = timeline(AGENT, 2, first_seq=13, first_turn=3)
    async with following(quiet) as reader:
        await quiet.record(more[6:])
        await notify(quiet, Projected(AGENT, 24))
        await asyncio.sleep(0.2)
        await quiet.record(more[:6])
        await notify(quiet, Projected(AGENT, 18))
        frames = await reader.until(lambda fs: 24 in seqs(fs), seconds=5)
    assert seqs(frames) == list(range(13, 25))


async def test_a_follower_that_joins_while_the_projection_lacks_events_gets_them_later(
    quiet: World,
) -> None:
    """Events 19-24 are written before 13-18 (a write that failed, made again later) and
    the follower joins in between: its replay ends at 12, where the agent's last seq is
    24; once 13-18 are written, it gets 13-24, each once."""
    more = timeline(AGENT, 2, first_seq=13, first_turn=3)
    await quiet.record(more[6:])
    async with following(quiet) as reader:
        await quiet.record(more[:6])
        await notify(quiet, Projected(AGENT, 18))
        frames = await reader.until(lambda fs: 24 in seqs(fs), seconds=5)
    assert seqs(frames) == list(range(13, 25))


@pytest.mark.parametrize(
    ("headers", "body", "status", "says"),
    [
        ({}, b'{"agents": []}', 401, "X-Teaspill-Notify-Token"),
        ({"X-Teaspill-Notify-Token": "wrong"}, b'{"agents": []}', 401, "missing or wrong"),
        (NOTICE, b"{", 400, "not valid JSON"),
        (NOTICE, b'{"agents": [{"agent": "acme.x"}]}', 422, "ProjectedBatch"),
        (NOTICE, b'{"agents": [{"agent": "no", "last_seq": 1}]}', 422, "not an address"),
    ],
)
async def test_a_bad_notice_is_refused_with_a_sentence(
    world: World, headers: dict[str, str], body: bytes, status: int, says: str
) -> None:
    response = await world.client.post(NOTIFY_PATH, content=body, headers=headers)
    assert response.status_code == status
    assert says in response.json()["error"]["message"]


async def test_notices_are_refused_when_no_token_is_set(tmp_path: Path) -> None:
    from services.gateway.app import create_app  # noqa: PLC0415
    from services.settings import Settings  # noqa: PLC0415

    app = create_app(Settings(home=tmp_path))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://gateway"
    ) as client:
        response = await client.post(NOTIFY_PATH, content=b'{"agents": []}', headers=NOTICE)
    assert response.status_code == 403
    assert "switched off" in response.json()["error"]["message"]


async def listened(url: str) -> None:
    """Until the gateway's session listens on the channel (its LISTEN was its last query)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
        for _ in range(250):
            cursor = await db.execute(
                "select 1 from pg_stat_activity where datname = current_database()"
                " and query ilike 'listen %'"
            )
            if await cursor.fetchone():
                return
            await asyncio.sleep(0.02)
    raise AssertionError("the gateway never listened on the projection's channel")


async def test_on_postgresql_the_databases_notice_brings_new_events(
    tmp_path: Path, postgres: Cluster
) -> None:
    """No projector lists this gateway: the commit's NOTIFY is what it hears."""
    url = postgres.database()
    async with make_world(tmp_path, settings_for(tmp_path, url), poll_interval=NEVER) as world:
        await listened(url)
        async with following(world) as reader:
            await world.record(timeline(AGENT, 1, first_seq=13, first_turn=3))
            frames = await reader.until(lambda fs: 18 in seqs(fs), seconds=5)
    assert seqs(frames) == [13, 14, 15, 16, 17, 18]


def test_a_notice_is_an_address_and_a_seq() -> None:
    assert parsed("acme.alpha 18") == Projected("acme.alpha", 18)
    assert parsed("acme.alpha") is None
    assert parsed("acme.alpha x") is None
