"""The real bundled model, end to end through restate-server and the endpoint."""

from __future__ import annotations

import pytest

from schemas.events import ModelMessage
from services.cli.main import EXAMPLE_SPEC
from services.specs import load_spec
from tests.durable.conftest import LiveStack

pytestmark = [pytest.mark.durable, pytest.mark.model]


def test_the_bundled_model_answers_through_the_whole_stack(stack: LiveStack, address: str) -> None:
    spec = load_spec(EXAMPLE_SPEC)
    first = stack.ingress.message(address, "Hello! Please greet me.", spec)
    second = stack.ingress.message(address, "Thank you. Say goodbye.", spec)

    assert first.reply.strip()
    assert second.reply.strip()
    models = [e.body for e in stack.events(address) if isinstance(e.body, ModelMessage)]
    assert [m.model for m in models] == ["smollm2", "smollm2"]
    assert [m.text for m in models] == [first.reply, second.reply]
    assert all(m.usage.prompt_tokens > 0 and m.usage.completion_tokens > 0 for m in models)
    assert models[0].usage.prompt_tokens < models[1].usage.prompt_tokens
    assert 0 < models[1].usage.cached_tokens <= models[1].usage.prompt_tokens, (
        "the second turn reuses the first turn's prompt from llama.cpp's cache"
    )
