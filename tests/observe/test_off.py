"""Without a collector configured, tracing is not there at all: no span is made, no header
is added, and a step's function is run as it is."""

from __future__ import annotations

from services.ingress import headers
from services.observe import tracing


def _step(value: int) -> int:
    return value + 1


def test_nothing_is_set_up_without_an_endpoint() -> None:
    assert tracing.setup("", "teaspill-test") is False
    assert not tracing.enabled()


def test_a_step_function_is_not_wrapped() -> None:
    assert tracing.traced("execute_tool x", None, {}, _step) is _step


def test_ingress_requests_carry_no_trace_header() -> None:
    assert headers(b"{}", "key") == {"content-type": "application/json", "idempotency-key": "key"}


def test_a_span_block_runs_without_a_span() -> None:
    with tracing.span("wake") as made:
        assert made is None
    assert tracing.current() is None
    assert tracing.trace_ids() is None
