"""The store's reads of timelines, on both stores: an approval and a page call as the
timeline shows them, a message's story, queues, the newest whole turns, a tenant's tokens,
publishable origins, what an erasure finds and what it leaves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import msgspec

from schemas.effects import leg_key
from schemas.events import (
    ApprovalAnswered,
    ApprovalRequested,
    ArtifactWritten,
    Event,
    EventBody,
    MessageQueued,
    MessageRejected,
    ModelMessage,
    PageCallClaimed,
    ToolCalled,
    TurnEnded,
    TurnStarted,
)
from schemas.model import Usage
from schemas.tenant import ApiKey
from services.projection.stores import ReadSide
from tests.projection.conftest import Stores
from tests.projection.test_store import T0

ASKED = ApprovalRequested("t1r1-c1", "c1", "ledger")
PICK = ApprovalRequested("t2r1-p1", "p1", "page:pick", page=True)
BODIES: list[tuple[int, EventBody]] = [
    (1, TurnStarted("hi", "helper", 1, message_id="m1")),
    (1, ModelMessage("script", "x", usage=Usage(prompt_tokens=10, completion_tokens=5))),
    (1, ToolCalled("c1", "ledger")),
    (1, ASKED),
    (1, MessageQueued("next", message_id="m2")),
    (1, MessageQueued("again", message_id="m3")),
    (1, MessageQueued("again", message_id="m3")),
    (1, ApprovalAnswered("t1r1-c1", approve=True)),
    (1, ArtifactWritten("c1", "out.txt", 3, "sha-a")),
    (1, ArtifactWritten("c1", "shared.txt", 3, "sha-b")),
    (1, TurnEnded("succeeded", "ok")),
    (2, TurnStarted("next", "helper", 1, message_id="m2")),
    (2, PICK),
    (2, PageCallClaimed("t2r1-p1", "page-A")),
    (2, MessageQueued("four", message_id="m4")),
    (2, MessageRejected("four", message_id="m4")),
]
EVENTS = [
    Event("acme.r", seq, turn, 1, T0 + timedelta(seconds=seq), body)
    for seq, (turn, body) in enumerate(BODIES, start=1)
]
OTHERS = [
    Event("acme.r.kid", 1, 1, 1, T0, ArtifactWritten("k", "a.txt", 3, "sha-a")),
    Event("acme.rx", 1, 1, 1, T0, ArtifactWritten("k", "b.txt", 3, "sha-b")),
    Event("globex.g", 1, 1, 1, T0, EVENTS[1].body),
    Event("acme.r.kid", 2, 1, 1, T0, ArtifactWritten("k", "c.txt", 3, "sha-c")),
    Event("globex.g", 2, 1, 1, T0, ArtifactWritten("g", "c.txt", 3, "sha-c")),
]


def run(stores: Stores, work: Callable[[ReadSide], Awaitable[None]]) -> None:
    async def go() -> None:
        async with await stores.fresh() as store:
            await store.record_events([*EVENTS, *OTHERS])
            await work(store)

    asyncio.run(go())


def seqs(events: list[Event]) -> list[int]:
    return [event.seq for event in events]


def test_approvals_and_page_calls_as_the_timeline_shows_them(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        answered = await store.approval("acme.r", "t1r1-c1")
        assert answered is not None
        assert (answered.turn, answered.answered, answered.turn_ended) == (1, True, True)
        assert (answered.asked, answered.claimed) == (ASKED, "")
        claimed = await store.approval("acme.r", "t2r1-p1")
        assert claimed is not None
        assert (claimed.turn, claimed.answered, claimed.turn_ended) == (2, False, False)
        assert (claimed.asked, claimed.claimed) == (PICK, "page-A")
        assert await store.approval("acme.r", "t9r9-none") is None
        assert await store.approval("acme.rx", "t1r1-c1") is None
        assert await store.open_page_calls("acme.r") == {"t2r1-p1": "page-A"}
        assert await store.open_page_calls("acme.none") == {}

    run(stores, work)


def test_a_messages_story_and_the_queue(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        assert seqs(await store.message_story("acme.r", "m1")) == [1, 4, 8, 11]
        assert seqs(await store.message_story("acme.r", "m2")) == [5, 12, 13, 16]
        assert seqs(await store.message_story("acme.r", "m4")) == [15, 16]
        assert await store.message_story("acme.r", "m9") == []
        # m2 started a turn and m4 was refused; m3, queued twice, counts once.
        assert await store.queued(["acme.r", "acme.rx", "acme.none"]) == {"acme.r": 1}
        assert await store.queued([]) == {}
        assert seqs(await store.turn("acme.r", 2)) == [12, 13, 14, 15, 16]
        assert await store.turn("acme.r", 3) == []

    run(stores, work)


def test_the_newest_whole_turns_and_a_page_within_its_bytes(stores: Stores) -> None:
    sizes = [len(msgspec.json.encode(event)) for event in EVENTS]

    async def work(store: ReadSide) -> None:
        assert seqs(await store.recent("acme.r", 10**6)) == list(range(1, 17))
        assert seqs(await store.recent("acme.r", sum(sizes[11:]) + sizes[10] - 1)) == [
            *range(12, 17)
        ]
        assert seqs(await store.recent("acme.r", 1)) == [16]
        page = await store.page("acme.r", 0, 100, max_bytes=sizes[0] + sizes[1])
        assert (seqs(page.events), page.full) == ([1, 2], True)
        page = await store.page("acme.r", 0, 100, max_bytes=1)
        assert (seqs(page.events), page.full) == ([1], True)
        last = await store.page("acme.r", 14, 100)
        assert (seqs(last.events), last.full) == ([15, 16], False)

    run(stores, work)


def test_a_tenants_tokens_and_its_catalog(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        assert await store.tokens_since("acme", T0) == 15
        assert await store.tokens_since("acme", T0 + timedelta(seconds=3)) == 0
        assert await store.tokens_since("globex", T0) == 15
        assert await store.tokens_since("initech", T0) == 0
        assert await store.agent_count("acme") == 3
        waiting = await store.agents("acme", status="waiting")
        assert [row.address for row in waiting] == ["acme.r"]
        assert [row.address for row in await store.agents("acme", kind="helper")] == ["acme.r"]
        await store.mark_archived("acme.r", archived=True)
        archived = await store.agent("acme.r")
        assert archived is not None
        assert archived.status == "archived"
        await store.mark_archived("acme.r", archived=False)
        back = await store.agent("acme.r")
        assert back is not None
        assert back.status == "idle"

    run(stores, work)


def test_only_live_publishable_keys_give_origins(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        for key in (
            ApiKey("p1", "acme", "publishable", "h1", T0, origins=("https://a.test",)),
            ApiKey("p2", "globex", "publishable", "h2", T0, origins=("https://b.test",)),
            ApiKey(
                "p3", "acme", "publishable", "h3", T0, revoked_at=T0, origins=("https://c.test",)
            ),
            ApiKey("r1", "acme", "read", "h4", T0),
        ):
            await store.record_key(key)
        assert await store.publishable_origins() == {"https://a.test", "https://b.test"}
        assert [key.id for key in await store.keys("acme")] == ["p1", "p3", "r1"]
        assert len(await store.keys()) == 4

    run(stores, work)


def test_what_an_erasure_finds_and_what_it_leaves(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        found = await store.erasable("acme.r")
        assert found.agents == ("acme.r", "acme.r.kid")
        key = "acme.r/t1/r1/c1"
        assert found.idempotency_keys == (key, leg_key(key, 1))
        assert found.artifacts == ("sha-a",)  # acme.rx wrote sha-b, globex.g sha-c: they stay
        # What a deletion reports counts sha-c as the tenant's: it says nothing of globex.
        assert found.written == 2
        assert (found.events, found.started) == (18, 1)
        await store.erase("acme.r")
        assert await store.timeline("acme.r") == []
        assert await store.timeline("acme.r.kid") == []
        assert await store.agent("acme.r") is None
        assert seqs(await store.timeline("acme.rx")) == [1]
        await store.erase("acme", tenant="acme")
        assert await store.agent_count("acme") == 0
        assert await store.agent_count("globex") == 1

    run(stores, work)


def test_what_the_metrics_count_and_who_wrote_an_artifact(stores: Stores) -> None:
    async def work(store: ReadSide) -> None:
        tallies = await store.tallies()
        assert sorted(tallies.turns) == [("succeeded", 1)]
        assert tallies.rounds == (2, 20, 10, 0)
        assert tallies.tool_errors == 0
        assert sorted(tallies.agents) == [("idle", 2), ("running", 1), ("waiting", 1)]
        assert [(model, int(calls)) for model, calls, *_ in tallies.models] == [("script", 2)]
        assert tallies.fallbacks == []
        assert await store.wrote_artifact("acme.r", "sha-a")
        assert not await store.wrote_artifact("acme.rx", "sha-a")

    run(stores, work)
