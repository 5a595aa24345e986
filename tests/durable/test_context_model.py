"""The context engine with the real bundled SmolLM2 at a 1,024-token window: a long chat
never fails, folds happen, and rounds after a fold reuse the prompt cache."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schemas.events import ContextFolded, Event, ModelMessage, TurnEnded
from schemas.spec import AgentSpec, Limits
from services.ingress import Ingress
from services.stack import isolated_settings
from services.stack.endpoint import Endpoint
from services.stack.restate import RestateServer, register
from tests.durable.conftest import LiveStack, stop_all

pytestmark = [pytest.mark.durable, pytest.mark.model]

TURNS = 60
SPEC = AgentSpec(
    kind="chat",
    instructions="You are a friendly assistant. Answer in one or two sentences.",
    model="smollm2",
    limits=Limits(max_tokens=48),
)
QUESTIONS = (
    "Tell me something about the sea.",
    "What did you just say, in one sentence?",
    "Name a colour and a fruit.",
    "Why is the sky blue?",
    "Give me a short tip for cooking rice.",
)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    home: Path = tmp_path_factory.mktemp("small-window")
    settings = isolated_settings(home, model_context=1024)
    restate, endpoint = RestateServer(settings), Endpoint(settings)
    restate.start()
    try:
        endpoint.start()
        register(settings)
        ingress = Ingress(settings.ingress_url)
        yield LiveStack(settings, restate, endpoint, ingress)
        ingress.close()
    finally:
        stop_all(restate, endpoint)


@pytest.mark.timeout(7200)
def test_sixty_turns_of_smollm2_at_a_1024_token_window(
    small: LiveStack, address: str, record_testsuite_property: Callable[[str, object], None]
) -> None:
    for turn in range(1, TURNS + 1):
        answer = small.ingress.message(address, QUESTIONS[turn % len(QUESTIONS)], SPEC)
        assert answer.status.last_outcome == "succeeded", (turn, answer)
    events = small.events(address)
    ended = [e.body for e in events if isinstance(e.body, TurnEnded)]
    assert len(ended) == TURNS
    assert all(e.outcome == "succeeded" for e in ended)
    assert any(isinstance(e.body, ContextFolded) for e in events)
    calls = [e.body for e in events if isinstance(e.body, ModelMessage)]
    assert all(0 < c.usage.prompt_tokens + 48 <= 1024 for c in calls)
    after = cached_after_folds(events)
    record_testsuite_property("cached_share_after_fold", round(after, 3))  # junit report
    assert after > 0.3, f"only {after:.0%} of prompt tokens after a fold came from the cache"


def cached_after_folds(events: list[Event]) -> float:
    """The cached share of prompt tokens of model calls after a fold, but the first one
    after each fold (which evaluates the new fold block)."""
    prompt = cached = 0
    since = -1
    for event in events:
        if isinstance(event.body, ContextFolded):
            since = 0
        elif isinstance(event.body, ModelMessage) and since >= 0:
            since += 1
            if since > 1:
                prompt += event.body.usage.prompt_tokens
                cached += event.body.usage.cached_tokens
    return cached / prompt if prompt else 0.0
