"""Folds on the timeline through the gateway: the JSON page and the CLI's line."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from schemas.events import ContextFolded, Event, TimelinePage
from services.cli.render import describe
from tests.gateway.conftest import World

pytestmark = pytest.mark.anyio

FOLD = ContextFolded(1, 4, "The user asked about tides and rice.", 900, 410, "smollm2")


async def test_a_fold_is_served_with_its_summary_and_turns(world: World) -> None:
    event = Event("acme.alpha", 13, 5, 1, datetime(2026, 12, 1, tzinfo=UTC), FOLD)
    await world.record([event])
    response = await world.client.get(
        "/v1/agents/acme.alpha/timeline?after=12", headers=world.auth("read")
    )
    page = msgspec.json.decode(response.content, type=TimelinePage)
    assert page.events == (event,)
    body = response.json()["events"][0]["body"]
    assert body["type"] == "context_folded"
    assert (body["first_turn"], body["last_turn"], body["summary"]) == (1, 4, FOLD.summary)


def test_the_cli_shows_which_turns_a_fold_covers_and_its_summary() -> None:
    event = Event("acme.alpha", 13, 5, 1, datetime(2026, 12, 1, tzinfo=UTC), FOLD)
    assert describe(event) == (
        "  #13   folded turns 1-4 (smollm2, 900 → 410 tokens): The user asked about tides and rice."
    )
    extractive = msgspec.structs.replace(FOLD, first_turn=2, last_turn=2, model="", extractive=True)
    line = describe(msgspec.structs.replace(event, body=extractive))
    assert "folded turn 2 (extractive summary, 900 → 410 tokens)" in line
