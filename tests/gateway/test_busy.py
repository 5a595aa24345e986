"""A message to a busy agent and pause and resume through the gateway: what is sent, and
what is refused at once. Ingress is faked."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from schemas.events import (
    AgentPaused,
    Event,
    EventBody,
    MessageQueued,
    MessageRejected,
    TurnStarted,
)
from schemas.spec import AgentSpec
from schemas.tenant import PublishedSpec
from tests.gateway.conftest import T0, World, make_world, settings_for

pytestmark = pytest.mark.anyio

MESSAGES = "/v1/agents/acme.alpha/messages"


async def busy(world: World, *more: EventBody) -> None:
    """acme.alpha (12 events, 2 turns) starts turn 3, which is running."""
    bodies: list[EventBody] = [TurnStarted("slow work", "helper", 1), *more]
    await world.record(
        [
            Event("acme.alpha", seq, 3, 1, T0 + timedelta(seconds=seq), body)
            for seq, body in enumerate(bodies, start=13)
        ]
    )


async def send(world: World, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    response = await world.client.post(MESSAGES, json=body, headers=world.auth("write"))
    return response.status_code, response.json()


async def test_reject_to_a_busy_agent_is_409_at_once_and_sends_nothing(world: World) -> None:
    await busy(world)
    status, answer = await send(world, {"text": "only if idle", "while_busy": "reject"})
    assert status == 409
    assert "is running" in str(answer)
    assert "while_busy" in str(answer)
    assert world.ingress.sent == []


async def test_reject_to_an_idle_agent_is_sent_like_any_message(world: World) -> None:
    status, _ = await send(world, {"text": "only if idle", "while_busy": "reject"})
    assert status == 202
    assert world.ingress.sent[-1][1]["wake"]["while_busy"] == "reject"


async def test_a_steer_to_a_running_agent_goes_to_its_wake_and_to_arrived(world: World) -> None:
    await busy(world)
    status, answer = await send(world, {"text": "and this", "while_busy": "steer"})
    assert status == 202
    address, sent, _ = world.ingress.sent[-1]
    assert (address, sent["wake"]["text"], sent["wake"]["while_busy"]) == (
        "acme.alpha",
        "and this",
        "steer",
    )
    told = world.ingress.told[-1]
    assert told[:2] == ("acme.alpha", "arrived")
    assert told[2]["invocation"] == answer["invocation_id"]
    assert told[2]["message"]["id"] == answer["message_id"] == sent["wake"]["id"]


async def test_a_message_to_an_idle_agent_only_goes_to_the_wake(world: World) -> None:
    assert (await send(world, {"text": "idle", "while_busy": "interrupt"}))[0] == 202
    assert (await send(world, {"text": "idle too"}))[0] == 202
    assert len(world.ingress.sent) == 2
    assert world.ingress.told == []


async def test_a_queued_message_to_a_running_agent_is_told_to_arrived_to_be_counted(
    world: World,
) -> None:
    await busy(world)
    assert (await send(world, {"text": "later", "while_busy": "queue"}))[0] == 202
    assert (await send(world, {"text": "later too"}))[0] == 202
    assert len(world.ingress.sent) == 2
    assert [t[1] for t in world.ingress.told] == ["arrived", "arrived"]


async def test_the_spec_sets_what_a_message_does_when_it_says_nothing(world: World) -> None:
    rejecting = AgentSpec("helper", "Help.", version=2, while_busy="reject")
    await world.store.record_spec(PublishedSpec("acme", rejecting, T0))
    await busy(world)
    assert (await send(world, {"text": "hello"}))[0] == 409
    assert (await send(world, {"text": "hello", "while_busy": "queue"}))[0] == 202


async def test_an_unknown_policy_is_a_422_naming_the_choices(world: World) -> None:
    status, answer = await send(world, {"text": "x", "while_busy": "coalesce"})
    assert status == 422
    assert "steer" in str(answer)


async def test_pause_and_resume_are_one_way_and_need_a_write_key(world: World) -> None:
    paused = await world.client.post("/v1/agents/acme.alpha/pause", headers=world.auth("admin"))
    assert paused.status_code == 202, paused.text
    assert paused.json()["after_seq"] == 12
    address, handler, body, key = world.ingress.told[-1]
    assert (address, handler, key) == ("acme.alpha", "pause", "pause after 12")
    assert body["by"]
    await world.record([Event("acme.alpha", 13, 2, 0, T0, AgentPaused(body["by"]))])
    row = await world.client.get("/v1/agents/acme.alpha", headers=world.auth("read"))
    assert row.json()["status"] == "paused"

    resumed = await world.client.post("/v1/agents/acme.alpha/resume", headers=world.auth("write"))
    assert resumed.status_code == 202
    assert world.ingress.sent[-1][1]["wake"]["type"] == "resume"
    assert world.ingress.sent[-1][2] == "resume after 13"

    refused = await world.client.post("/v1/agents/acme.alpha/pause", headers=world.auth("read"))
    assert refused.status_code == 403
    unknown = await world.client.post("/v1/agents/acme.nobody/pause", headers=world.auth("write"))
    assert unknown.status_code == 404


async def test_the_agent_row_counts_the_messages_it_holds_queued(world: World) -> None:
    await busy(world, MessageQueued("a", "ma"), MessageQueued("b", "mb"))

    async def queued() -> tuple[int, int]:
        one = await world.client.get("/v1/agents/acme.alpha", headers=world.auth("read"))
        listed = await world.client.get("/v1/agents", headers=world.auth("read"))
        row = next(a for a in listed.json()["agents"] if a["address"] == "acme.alpha")
        return one.json()["queued"], row["queued"]

    assert await queued() == (2, 2)
    started = TurnStarted("a", "helper", 1, message_id="ma")
    await world.record([Event("acme.alpha", 16, 4, 0, T0 + timedelta(seconds=16), started)])
    assert await queued() == (1, 1)
    held = MessageQueued("b", "mb")  # heard by the running turn, then held by a pause
    await world.record([Event("acme.alpha", 17, 4, 0, T0 + timedelta(seconds=17), held)])
    assert await queued() == (1, 1)


async def test_a_message_that_would_queue_past_the_agents_queue_is_429(tmp_path: Path) -> None:
    settings = settings_for(tmp_path).model_copy(update={"agent_queue": 2})
    async with make_world(tmp_path, settings) as world:
        await busy(world, MessageQueued("a", "ma"), MessageQueued("b", "mb"))
        status, answer = await send(world, {"text": "one more"})
        assert status == 429
        assert answer["error"]["message"] == (  # type: ignore[index]
            "agent acme.alpha is running and holds 2 queued messages, the most one agent may "
            "hold (TEASPILL_AGENT_QUEUE): send it again once the agent works through them"
        )
        assert world.ingress.sent == []
        steered, _ = await send(world, {"text": "join in", "while_busy": "steer"})
        assert steered == 202

        refused = MessageRejected("b", "mb", "full")  # the agent refused one it heard queued
        await world.record([Event("acme.alpha", 16, 3, 1, T0 + timedelta(seconds=16), refused)])
        taken, _ = await send(world, {"text": "one more"})
        assert taken == 202
