"""Pages and histories bounded in bytes, not only in count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from schemas.events import Event, TimelinePage
from services.settings import Settings
from tests.gateway.conftest import LIVE_TOKEN, make_world

pytestmark = pytest.mark.anyio


def bounded(home: Path, **overrides: object) -> Settings:
    base = {"home": home, "live_token": LIVE_TOKEN, "key_rate": 0.0, "key_streams": 1000}
    return Settings(**{**base, **overrides})  # type: ignore[arg-type]


def size(event: Event) -> int:
    return len(msgspec.json.encode(event))


async def test_a_page_ends_before_the_event_that_passes_its_bytes(tmp_path: Path) -> None:
    async with make_world(tmp_path, bounded(tmp_path, page_max_bytes=1024)) as world:
        everything = await world.store.timeline("acme.alpha", 0, 500)
        response = await world.client.get(
            "/v1/agents/acme.alpha/timeline?limit=500", headers=world.auth("read")
        )
        page = msgspec.json.decode(response.content, type=TimelinePage)
        sizes = [size(e) for e in everything]
        fits = next(n for n in range(len(sizes), 0, -1) if sum(sizes[:n]) <= 1024)
        assert 0 < len(page.events) == fits < len(everything)
        assert page.last_seq == everything[-1].seq
        rest = await world.client.get(
            f"/v1/agents/acme.alpha/timeline?limit=500&after={page.events[-1].seq}",
            headers=world.auth("read"),
        )
        assert msgspec.json.decode(rest.content, type=TimelinePage).events[0].seq == fits + 1


async def test_one_event_larger_than_a_page_is_a_page_of_its_own(tmp_path: Path) -> None:
    async with make_world(tmp_path, bounded(tmp_path, page_max_bytes=1024)) as world:
        events = await world.store.timeline("acme.alpha", 0, 1, max_bytes=10)
        assert [e.seq for e in events] == [1]


async def run_history(world: Any) -> list[dict[str, Any]]:
    async with world.streams.stream(
        "POST",
        "/v1/agui",
        json={"threadId": "acme.alpha", "runId": "h", "messages": []},
        headers=world.auth("read"),
    ) as response:
        body = (await response.aread()).decode()
    return [
        msgspec.json.decode(line[6:]) for line in body.splitlines() if line.startswith("data: ")
    ]


async def test_an_ag_ui_history_holds_the_newest_whole_turns_that_fit(tmp_path: Path) -> None:
    """acme.alpha has two turns of six events: a bound that holds one turn and a half
    shows the second turn alone."""
    async with make_world(tmp_path, bounded(tmp_path, history_max_bytes=2048)) as world:
        events = await world.store.timeline("acme.alpha", 0, 500)
        second = [e for e in events if e.turn == 2]
        assert sum(size(e) for e in second) <= 2048 < sum(size(e) for e in events)
        recent = await world.store.recent("acme.alpha", 2048)
        assert recent == second
        snapshot = [e for e in await run_history(world) if e["type"] == "MESSAGES_SNAPSHOT"]
        messages = snapshot[0]["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[0]["content"] == "question 2"
    async with make_world(tmp_path / "big", bounded(tmp_path / "big")) as world:
        assert len(await world.store.recent("acme.alpha", 4 * 1024 * 1024)) == 12


async def test_a_page_says_whether_more_may_follow_at_once(tmp_path: Path) -> None:
    async with make_world(tmp_path) as world:
        store = world.store
        assert (await store.page("acme.alpha", 0, 5)).full
        cut = await store.page("acme.alpha", 0, 500, max_bytes=600)
        assert cut.full
        assert 0 < len(cut.events) < 12
        end = await store.page("acme.alpha", 0, 500)
        assert (len(end.events), end.full) == (12, False)
        later = await store.timeline("acme.beta", 0, 500)
        await world.record([msgspec.structs.replace(later[-1], seq=9)])
        gap = await store.page("acme.beta", 0, 500)
        assert (len(gap.events), gap.full) == (6, False)


async def test_a_follower_gets_every_event_through_pages_bounded_in_bytes(
    tmp_path: Path,
) -> None:
    async with make_world(tmp_path, bounded(tmp_path, page_max_bytes=1024)) as world:
        request = world.streams.build_request(
            "GET", "/v1/agents/acme.alpha/events", headers=world.auth("read")
        )
        response = await world.streams.send(request, stream=True)
        try:
            seqs: list[int] = []
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    seqs.append(int(line[4:]))
                if seqs and seqs[-1] == 12:
                    break
        finally:
            await response.aclose()
        assert seqs == list(range(1, 13))
