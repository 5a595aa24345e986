"""Tracing fails open: with the collector unreachable (a port that takes connections and
never answers), turns run as fast as with tracing off, and none fails."""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from schemas.spec import AgentSpec
from schemas.wake import Message
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Stack, isolated_settings

pytestmark = pytest.mark.durable

SPEC = AgentSpec(kind="calc", instructions="Calculate.", model="script", tools=("calculator",))
CALCULATE = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}"},
)
TURNS = 12


@contextmanager
def black_hole() -> Iterator[str]:
    """A loopback port whose backlog fills and whose connections are never read."""
    with closing(socket.socket()) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@contextmanager
def ingress_of(home: Path, **settings: str) -> Iterator[Ingress]:
    config = isolated_settings(home, **settings)
    # Spans leave at once: each turn's export meets the dead collector while turns run.
    with (
        Stack(config, env={"OTEL_BSP_SCHEDULE_DELAY": "10"}, gateway=False),
        closing(Ingress(config.ingress_url)) as ingress,
    ):
        yield ingress


def timed_turn(ingress: Ingress, address: str) -> float:
    began = time.perf_counter()
    result = ingress.wake(address, Message(CALCULATE, spec=SPEC))
    took = time.perf_counter() - began
    assert result.reply == "It is 42"
    return took


def test_a_dead_collector_costs_a_turn_nothing(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with (
        black_hole() as dead,
        ingress_of(
            tmp_path / "traced", otlp_endpoint=dead, restate_tracing_endpoint=dead
        ) as traced,
        ingress_of(tmp_path / "plain") as plain,
    ):
        timed_turn(traced, "acme.warm")
        timed_turn(plain, "acme.warm")
        on: list[float] = []
        off: list[float] = []
        for turn in range(TURNS):  # interleaved, so both meet the same load on the machine
            on.append(timed_turn(traced, f"acme.on-{turn}"))
            off.append(timed_turn(plain, f"acme.off-{turn}"))

    median_on, median_off = statistics.median(on), statistics.median(off)
    record_property("turn with a dead collector (median s)", round(median_on, 4))
    record_property("turn with tracing off (median s)", round(median_off, 4))
    print(f"median turn: {median_on:.4f} s with a dead collector, {median_off:.4f} s off")  # noqa: T201
    assert median_on <= median_off * 1.25 + 0.02, (on, off)
    assert max(on) < 5.0, "no turn waited for an export"
    log = (tmp_path / "traced" / "logs" / "endpoint.log").read_text()
    assert "Failed to export spans batch" in log, "spans were made, and met the dead collector"
