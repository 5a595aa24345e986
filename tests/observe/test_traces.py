"""Traces on a real stack exported to a real trace store (Phoenix, over OTLP): the gateway's
request, restate-server's spans, the wake, the model call and the tool call in one trace."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from services.executor.scripted import script
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.fixtures.trace_store import Span, TraceStore, trace_store
from tests.gateway.test_stack import admin_key

pytestmark = pytest.mark.durable

CALCULATE = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}"},
)
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
"""Spans leave each process within 0.1 s of ending (the SDK's default is 5 s)."""


@dataclass
class Traced:
    store: TraceStore
    http: httpx.Client
    key: str

    def send(self, address: str, text: str, traceparent: str) -> None:
        response = self.http.post(
            f"/v1/agents/{address}/messages",
            json={"text": text, "kind": "calc"},
            headers={"Authorization": f"Bearer {self.key}", "traceparent": traceparent},
        )
        assert response.status_code == 202, response.text

    def ended(self, address: str) -> None:
        def seen() -> bool | None:
            page = self.http.get(
                f"/v1/agents/{address}/timeline?limit=500",
                headers={"Authorization": f"Bearer {self.key}"},
            )
            return (page.status_code == 200 and '"turn_ended"' in page.text) or None

        eventually(seen, 120, f"the turn of {address} to end")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    with trace_store(tmp_path_factory.mktemp("phoenix")) as running:
        yield running


@contextlib.contextmanager
def traced_stack(home: Path, store: TraceStore) -> Iterator[Traced]:
    settings = isolated_settings(
        home,
        tool_modules=("tests.fixtures.tools",),
        otlp_endpoint=store.http_url,
        restate_tracing_endpoint=store.grpc_url,
    )
    with (
        Stack(settings, env=FAST_EXPORT) as stack,
        httpx.Client(base_url=stack.gateway.url, timeout=30) as http,
    ):
        key = admin_key(settings, http)
        published = http.post(
            "/v1/specs",
            json={
                "kind": "calc",
                "instructions": "Calculate.",
                "model": "script",
                "tools": ["calculator"],
            },
            headers={"Authorization": f"Bearer {key}"},
        )
        assert published.status_code == 201, published.text
        yield Traced(store, http, key)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, store: TraceStore) -> Iterator[Traced]:
    with traced_stack(tmp_path_factory.mktemp("traced-home"), store) as stack:
        yield stack


def new_traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def named(spans: list[Span], prefix: str) -> list[Span]:
    return [s for s in spans if s.name.startswith(prefix)]


def test_one_message_with_a_tool_call_is_one_trace(traced: Traced) -> None:
    header, trace_id, caller = new_traceparent()
    traced.send("acme.traced", CALCULATE, header)
    traced.ended("acme.traced")

    def complete() -> list[Span] | None:
        spans = traced.store.spans(trace_id)
        names = {s.name.split(" ")[0] for s in spans}
        wanted = {"POST", "ingress", "wake", "chat", "execute_tool", "projection"}
        ids = {s.span_id for s in spans} | {caller}
        linked = all(s.parent_id in ids for s in spans)
        return spans if wanted <= names and linked else None

    spans = eventually(complete, 60, "the turn's spans in the store")
    by_id = {s.span_id: s for s in spans}
    (request,) = named(spans, "POST /v1/agents/{address}/messages")
    assert request.parent_id == caller, "the caller's trace is continued"
    assert any(by_id.get(s.parent_id or "") == request for s in named(spans, "ingress"))
    (wake,) = [s for s in named(spans, "wake") if s.attributes["teaspill.wake"] == "Message"]
    assert by_id[wake.parent_id or ""].name.startswith("invocation-attempt")
    calls = named(spans, "chat script")
    assert len(calls) == 2
    for call in calls:
        assert call.parent_id == wake.span_id
        attributes = call.attributes
        assert attributes["gen_ai.request.model"] == "script"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 0
        assert "gen_ai.server.time_to_first_token" in attributes
    (tool,) = named(spans, "execute_tool calculator")
    assert tool.parent_id == wake.span_id
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert [s.parent_id for s in named(spans, "projection write")] == [wake.span_id]
