"""A model that cannot be loaded fails the turn at once, with the sentence, instead of
retrying the step for ever."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.spec import AgentSpec
from schemas.wake import Message
from services.ingress import Ingress
from services.stack import Endpoint, RestateServer, isolated_settings, register
from tests.durable.conftest import LiveStack, stop_all

pytestmark = pytest.mark.durable


@pytest.fixture
def broken_model(tmp_path: Path) -> Iterator[LiveStack]:
    """A stack whose TEASPILL_MODEL_PATH is a file, but not a model."""
    bad = tmp_path / "damaged.gguf"
    bad.write_bytes(b"not a gguf file")
    settings = isolated_settings(tmp_path / "home", model_path=bad)
    restate = RestateServer(settings)
    endpoint = Endpoint(settings)
    restate.start()
    try:
        endpoint.start()
        register(settings)
        ingress = Ingress(settings.ingress_url)
        yield LiveStack(settings, restate, endpoint, ingress)
        ingress.close()
    finally:
        stop_all(restate, endpoint)


def test_a_model_that_cannot_load_fails_the_first_turn_with_the_sentence(
    broken_model: LiveStack,
) -> None:
    spec = AgentSpec(kind="plain", instructions="Be brief.", model="smollm2")
    started = time.monotonic()
    broken_model.ingress.send_wake("test.broken", Message("hello", spec=spec))
    ended = broken_model.wait_for_turn_end("test.broken", 1, timeout=30)
    seconds = time.monotonic() - started
    assert ended.outcome == "failed"
    assert "The model 'smollm2' cannot be loaded" in ended.reason
    assert seconds < 5, "the step is not retried"
