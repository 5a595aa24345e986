"""The async client against the gateway in process: typed answers, errors as one
`ApiError` with the gateway's sentence, and a follow that resumes by itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from schemas.events import Event
from schemas.spec import AgentSpec
from services.client import ApiError, AsyncClient, Item
from tests.gateway.conftest import World, timeline

pytestmark = pytest.mark.anyio


def client(world: World, key: str = "admin") -> AsyncClient:
    transport = world.streams._transport
    return AsyncClient("http://gateway", world.keys[key], transport=transport)


async def test_agents_timeline_and_specs_are_typed(world: World) -> None:
    async with client(world) as api:
        agents = [a.address async for a in api.agents()]
        assert agents == ["acme.alpha", "acme.beta", "acme.delta", "acme.gamma"]
        row = await api.agent("acme.alpha")
        assert (row.kind, row.last_seq, row.status) == ("helper", 12, "idle")
        page = await api.timeline("acme.alpha", after=2, limit=3)
        assert [e.seq for e in page.events] == [3, 4, 5]
        assert [e async for e in api.events("acme.alpha")] == timeline("acme.alpha", 2)
        assert [v.spec.kind for v in await api.specs()] == ["helper"]
        published = await api.publish(AgentSpec("calc", "Use the calculator."))
        assert (published.spec.kind, published.spec.version) == ("calc", 1)
        me = await api.me()
        assert (me.tenant, me.scope) == ("acme", "admin")


async def test_keys_are_made_listed_and_revoked(world: World) -> None:
    async with client(world) as api:
        made = await api.create_key("read")
        assert made.key.startswith(f"tsk_{made.info.id}_")
        held = await api.keys()
        assert [k.id for k in held][-1] == made.info.id
        assert {k.tenant for k in held} == {"acme"}
        revoked = await api.revoke_key(made.info.id)
        assert revoked.revoked_at is not None
        with pytest.raises(ApiError) as refused:
            await api.revoke_key("nosuchkey")
        assert refused.value.status == 404


async def test_every_refusal_is_an_api_error_with_the_sentence(world: World) -> None:
    async with client(world, "read") as api:
        with pytest.raises(ApiError) as error:
            await api.send("acme.alpha", "hello")
        assert (error.value.status, str(error.value)) == (
            403,
            "this route needs a write key; this key is read",
        )
        with pytest.raises(ApiError) as error:
            await api.agent("other.secret")
        assert error.value.status == 404
        assert error.value.message == (
            "there is no agent other.secret for this key: it is a key of tenant acme, and "
            "reaches only addresses that start with 'acme.'"
        )
    async with AsyncClient(
        "http://gateway", "tsk_nope", transport=client(world)._http._transport
    ) as bad:
        with pytest.raises(ApiError) as error:
            await bad.agents_page()
        assert error.value.status == 401
    async with AsyncClient("http://127.0.0.1:1", "k", retry_for=0) as nowhere:
        with pytest.raises(ApiError) as error:
            await nowhere.agent("acme.alpha")
        assert (error.value.status, error.value.retryable) == (0, True)


async def test_send_answers_where_to_follow(world: World) -> None:
    async with client(world, "write") as api:
        accepted = await api.send("acme.alpha", "hello", idempotency_key="k1")
        assert (accepted.after_seq, accepted.events_url) == (
            12,
            "/v1/agents/acme.alpha/events?after=12",
        )
    assert world.ingress.sent[-1][2] == "k1"


async def take(items: AsyncIterator[Item], count: int) -> list[Item]:
    got: list[Item] = []
    async for item in items:
        got.append(item)
        if len(got) == count:
            break
    return got


async def test_follow_replays_then_streams_new_events(world: World) -> None:
    async with client(world, "read") as api:
        follower = api.follow("acme.alpha", after=10)
        first = await asyncio.wait_for(take(follower, 2), 10)
        await world.record(timeline("acme.alpha", 1, first_seq=13, first_turn=3))
        rest = await asyncio.wait_for(take(follower, 6), 10)
        await follower.aclose()
    seqs = [item.seq for item in first + rest if isinstance(item, Event)]
    assert seqs == list(range(11, 19))
