"""The tools' voice with the real bundled SmolLM2: long messages to the example agent at a
1,024-token window (so the chat folds and `recall` can help), and no reply is a copy of a
tool result or a read-back. `python -m bench.voice` runs the forty-message chat."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.voice import copied, message, per_turn
from services.cli.talk import EXAMPLE_SPEC
from services.specs import load_spec
from services.stack import isolated_settings
from tests.durable.conftest import LiveStack, live_stack

pytestmark = [pytest.mark.durable, pytest.mark.model]

MESSAGES = 10
EXAMPLE = load_spec(EXAMPLE_SPEC)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    home: Path = tmp_path_factory.mktemp("voice")
    with live_stack(isolated_settings(home, model_context=1024)) as live:
        yield live


@pytest.mark.timeout(1800)
def test_long_messages_to_the_example_agent_get_replies_of_its_own(
    small: LiveStack, address: str
) -> None:
    for n in range(MESSAGES):
        small.ingress.message(address, message(n), EXAMPLE)
    turns = per_turn(small.events(address))
    assert len(turns) == MESSAGES
    copies = [ended.reply for results, ended in turns if copied(ended.reply, results)]
    assert copies == [], copies
    assert sum(ended.outcome == "succeeded" for _, ended in turns) >= MESSAGES - 1
