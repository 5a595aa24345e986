"""The real bundled model, end to end through restate-server and the endpoint."""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec
import pytest

from schemas.events import ModelMessage
from schemas.spec import Limits
from schemas.wake import Message
from services.cli.talk import EXAMPLE_SPEC
from services.specs import load_spec
from tests.durable.conftest import LiveStack, eventually

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


def group_cpu_seconds(pgid: int) -> float:
    """CPU time used so far by every process in the group (hypercorn and its worker)."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_over(pgid: int, seconds: float) -> float:
    before = group_cpu_seconds(pgid)
    time.sleep(seconds)
    return group_cpu_seconds(pgid) - before


def test_stop_during_a_long_generation_ends_the_turn_and_the_cpu_goes_idle(
    stack: LiveStack, address: str
) -> None:
    spec = msgspec.structs.replace(
        load_spec(EXAMPLE_SPEC), limits=Limits(max_tokens=1500, max_rounds=1)
    )
    story = "Write a very long story about a dragon and a lighthouse, in many chapters."
    stack.ingress.send_wake(address, Message(story, spec=spec))
    pgid = stack.endpoint.pid
    assert pgid is not None
    eventually(lambda: cpu_over(pgid, 0.5) > 0.4 or None, 30, "the model to be generating")

    started = time.monotonic()
    assert stack.ingress.stop(address).stopping
    ended = stack.wait_for_turn_end(address, 1, timeout=10)
    took = time.monotonic() - started

    assert ended.outcome == "stopped"
    assert took < 3, f"the stop took {took:.1f} s"
    assert not [e for e in stack.events(address) if isinstance(e.body, ModelMessage)]
    idle = cpu_over(pgid, 2.0)
    assert idle < 0.3, f"the endpoint used {idle:.2f} s of CPU in the 2 s after the stop"
