"""Per-model metrics in the gateway's Prometheus output, computed from the events."""

from __future__ import annotations

import pytest

from schemas.events import Event, EventBody, ModelFallback, ModelMessage
from schemas.model import Timing, Usage
from tests.gateway.conftest import T0, World

pytestmark = pytest.mark.anyio


async def test_each_model_has_its_calls_fallbacks_timings_and_reuse(world: World) -> None:
    fast = Timing(queue_seconds=0.5, first_token_seconds=0.25, tokens_per_second=80.0)
    slow = Timing(queue_seconds=1.5, first_token_seconds=0.75, tokens_per_second=40.0)
    bodies: list[tuple[int, int, EventBody]] = [
        (2, 1, ModelFallback("vllm", "smollm2", "It broke.")),
        (2, 1, ModelMessage("smollm2", "a", (), Usage(100, 5, 90), fast)),
        (2, 2, ModelMessage("smollm2", "b", (), Usage(100, 5, 70), slow)),
        (3, 1, ModelMessage("vllm", "c", (), Usage(50, 5, 0), fast)),
    ]
    await world.record(
        [Event("acme.beta", 7 + n, t, r, T0, b) for n, (t, r, b) in enumerate(bodies)]
    )
    text = (await world.metrics()).text
    for line in (
        'teaspill_model_calls_total{model="smollm2"} 2',
        'teaspill_model_calls_total{model="vllm"} 1',
        'teaspill_model_fallbacks_total{model="vllm"} 1',
        'teaspill_model_fallbacks_total{model="smollm2"} 0',
        'teaspill_model_errors_total{model="vllm"} 1',
        'teaspill_model_queue_seconds_sum{model="smollm2"} 2.0',
        'teaspill_model_queue_seconds_count{model="smollm2"} 2',
        'teaspill_model_first_token_seconds_sum{model="smollm2"} 1.0',
        'teaspill_model_tokens_per_second{model="smollm2"} 60.0',
        'teaspill_model_prompt_reuse_ratio{model="smollm2"} 0.8',
        'teaspill_model_prompt_reuse_ratio{model="vllm"} 0.0',
        "# TYPE teaspill_model_queue_seconds summary",
    ):
        assert line in text.splitlines(), line
