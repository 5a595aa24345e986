"""The funding rule through the gateway on a real stack: a turn that started runs to its
end past the tenant's day; after it, a message is refused before any turn exists: 429
with the gateway's sentence once the projection counts the day, and, for one the gateway
let through before that, recorded as refused by the agent with its sentence."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from schemas.events import MessageRejected, ModelMessage, TurnEnded, TurnStarted
from tests.durable.conftest import eventually
from tests.gateway.test_stack import CALCULATE, GatewayStack, gateway_stack, paced

pytestmark = pytest.mark.durable

DAILY = 10
ADDRESS = "acme.spender"


def refused_or_rejected(gw: GatewayStack, day: str) -> tuple[int, str]:
    """Send one more message: the gateway's status and, when it let the message through,
    the sentence the agent recorded it refused with."""
    response = paced(
        lambda: gw.http.post(
            f"/v1/agents/{ADDRESS}/messages",
            json={"text": "again", "kind": "calc"},
            headers=gw.auth,
        )
    )
    if response.status_code == 429:
        return 429, response.json()["error"]["message"]
    assert response.status_code == 202, response.text
    message_id = response.json()["message_id"]

    def rejected() -> str | None:
        for event in gw.timeline(ADDRESS):
            if isinstance(event.body, MessageRejected) and event.body.message_id == message_id:
                return event.body.message
        return None

    return 202, eventually(rejected, 60, "the agent to refuse the message")


def test_a_started_turn_runs_past_the_day_and_the_next_message_is_refused_before_a_turn(
    tmp_path: Path,
) -> None:
    with gateway_stack(tmp_path, tenant_daily_tokens=DAILY) as gw:
        gw.send(ADDRESS, CALCULATE)
        events = gw.wait_for(ADDRESS, "turn_ended")
        (ended,) = [e.body for e in events if isinstance(e.body, TurnEnded)]
        assert ended.outcome == "succeeded", ended.reason
        spent = [e.body.usage for e in events if isinstance(e.body, ModelMessage)]
        assert len(spent) == 2, "both rounds ran"
        assert sum(u.prompt_tokens + u.completion_tokens for u in spent) > DAILY
        day = events[0].at.date().isoformat()

        agent_said = (
            f"Tenant acme's agents used the day's {DAILY} model tokens "
            f"(TEASPILL_TENANT_DAILY_TOKENS) on {day} (UTC): no turn starts until midnight UTC."
        )
        # the gateway sums the day again every few seconds: until then, the agent refuses
        deadline = time.monotonic() + 60
        while (answer := refused_or_rejected(gw, day))[0] != 429:
            assert answer == (202, agent_said)
            assert time.monotonic() < deadline, "the gateway never counted the day"
        sentence = answer[1]
        assert sentence.startswith("tenant acme's agents used ")
        assert sentence.endswith(
            f"model tokens on {day} (UTC), the most for a day ({DAILY}): new messages are "
            "taken again tomorrow"
        )
        started = [e.turn for e in gw.timeline(ADDRESS) if isinstance(e.body, TurnStarted)]
        assert started == [1], "no turn started after the day was used"
