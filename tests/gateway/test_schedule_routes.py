"""The schedule routes' own checks, before anything reaches the agent's `Schedules`
object: one clock, a duration that reads, a known agent or a kind. Ingress is faked."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import World

pytestmark = pytest.mark.anyio

ROUTE = "/v1/agents/acme.alpha/schedules"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"text": "hi"}, "exactly one of 'every', 'cron' and 'at', got none"),
        ({"text": "hi", "every": "1h", "cron": "0 9 * * *"}, "got 'every', 'cron'"),
        ({"text": "hi", "every": "an hour"}, "90s, 5m, 1h30m or 2d"),
        ({"text": "hi", "at": "2026-12-03T09:00:00"}, "timezone info"),
        ({"text": "hi", "every": "1h", "while_busy": "reject"}, "while_busy"),
    ],
)
async def test_a_schedule_the_route_cannot_take_is_422_with_a_sentence(
    world: World, body: dict[str, str], words: str
) -> None:
    response = await world.client.post(ROUTE, json=body, headers=world.auth("write"))
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert words in message
    assert "Traceback" not in message
    assert "ScheduleError" not in message


async def test_a_schedule_for_an_agent_that_does_not_exist_needs_a_kind(world: World) -> None:
    response = await world.client.post(
        "/v1/agents/acme.nobody/schedules",
        json={"text": "hi", "every": "1h"},
        headers=world.auth("write"),
    )
    assert response.status_code == 404
    assert "must name a published kind" in response.json()["error"]["message"]


async def test_a_read_key_cannot_make_a_schedule(world: World) -> None:
    response = await world.client.post(
        ROUTE, json={"text": "hi", "every": "1h"}, headers=world.auth("read")
    )
    assert response.status_code == 403
