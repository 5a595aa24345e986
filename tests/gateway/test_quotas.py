"""Tenant quotas the gateway checks before a message goes out: agents per tenant, and
model tokens per day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.events import Event, ModelMessage
from schemas.model import Usage
from services.settings import Settings
from tests.gateway.conftest import LIVE_TOKEN, make_world

pytestmark = pytest.mark.anyio


def quota(home: Path, **overrides: object) -> Settings:
    base = {"home": home, "live_token": LIVE_TOKEN, "key_rate": 0.0, "key_streams": 1000}
    return Settings(**{**base, **overrides})  # type: ignore[arg-type]


async def test_a_message_that_would_make_one_agent_too_many_is_refused(tmp_path: Path) -> None:
    """acme has four agents (alpha, beta, gamma, delta)."""
    async with make_world(tmp_path, quota(tmp_path, tenant_agents=4)) as world:
        refused = await world.client.post(
            "/v1/agents/acme.fifth/messages",
            json={"text": "hi", "kind": "helper"},
            headers=world.auth("write"),
        )
        assert refused.status_code == 429
        assert refused.json()["error"]["message"] == (
            "tenant acme has 4 agents, the most one tenant may have: send to an agent that "
            "exists, or ask the operator to raise TEASPILL_TENANT_AGENTS"
        )
        existing = await world.client.post(
            "/v1/agents/acme.alpha/messages", json={"text": "hi"}, headers=world.auth("write")
        )
        assert existing.status_code == 202
        assert [address for address, _, _ in world.ingress.sent] == ["acme.alpha"]


async def test_once_the_days_tokens_are_used_new_messages_wait_for_tomorrow(
    tmp_path: Path,
) -> None:
    now = datetime.now(UTC)  # noqa: TID251 - the quota counts the real day
    async with make_world(tmp_path, quota(tmp_path, tenant_daily_tokens=1000)) as world:
        under = await world.client.post(
            "/v1/agents/acme.alpha/messages", json={"text": "hi"}, headers=world.auth("write")
        )
        assert under.status_code == 202
        spent = ModelMessage("script", "long", (), Usage(990, 10))
        await world.record([Event("acme.alpha", 13, 3, 1, now, spent)])
        other = Event("other.secret", 7, 2, 1, now, ModelMessage("s", "x", (), Usage(5000, 9)))
        await world.record([other])
        world.app.state.runtime.quotas.forget()
        refused = await world.client.post(
            "/v1/agents/acme.beta/messages", json={"text": "hi"}, headers=world.auth("write")
        )
        assert refused.status_code == 429
        day = now.date().isoformat()
        assert refused.json()["error"]["message"] == (
            f"tenant acme's agents used 1000 model tokens on {day} (UTC), the most for a day "
            "(1000): new messages are taken again tomorrow"
        )
        assert 1 <= int(refused.headers["Retry-After"]) <= 86400
        elsewhere = await world.client.post(
            "/v1/agents/other.secret/messages", json={"text": "hi"}, headers=world.auth("other")
        )
        assert elsewhere.status_code == 429


async def test_tokens_are_counted_per_tenant_and_from_midnight(tmp_path: Path) -> None:
    midnight = datetime(2026, 12, 2, tzinfo=UTC)
    async with make_world(tmp_path) as world:
        bodies = [
            ("acme.alpha", midnight - timedelta(seconds=1), 100),
            ("acme.alpha", midnight, 10),
            ("acme.beta", midnight + timedelta(hours=5), 20),
            ("acmex.one", midnight, 1000),
            ("other.secret", midnight, 1000),
        ]
        for seq, (agent, at, prompt) in enumerate(bodies, start=100):
            body = ModelMessage("m", "", (), Usage(prompt, 1))
            await world.record([Event(agent, seq, 9, 1, at, body)])
        assert await world.store.tokens_since("acme", midnight) == 10 + 1 + 20 + 1
        assert await world.store.agent_count("acme") == 4
