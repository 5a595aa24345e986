"""The spans and log records teaspill makes, exported to an in-memory exporter: a child's
wake linked to its parent's spawn, a log record with the ids of its span."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas.chat import ToolCall
from schemas.wake import ChildReport, Message, ParentRef, SpanRef, Wake
from services.observe import genai, logs, tracing

SPAWN = ToolCall("call-1", "spawn_agent", {"task": "hello"})


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.shutdown()


def ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (found,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return found


def spawn_span() -> SpanRef:
    attributes = {**genai.tool_call(SPAWN, "acme.parent", 1, 1), "teaspill.child.agent": "c"}
    return asyncio.run(genai.spawned(None, attributes))


def test_the_spawn_step_returns_the_ids_of_its_own_span(exported: InMemorySpanExporter) -> None:
    ref = spawn_span()
    spawn = only(exported, "execute_tool spawn_agent")
    assert (ref.trace_id, ref.span_id) == ids(spawn)
    assert spawn.attributes is not None
    assert spawn.attributes["teaspill.child.agent"] == "c"


def woken(kind: str, ref: SpanRef) -> Wake:
    if kind == "spawned by":
        return Message("hi", parent=ParentRef("acme.parent", 1, "call-1", ref))
    return ChildReport("acme.parent.c", 1, "call-1", "succeeded", "ok", ref)


@pytest.mark.parametrize("why", ["spawned by", "reported to"])
def test_a_wake_links_to_the_spawn_span(exported: InMemorySpanExporter, why: str) -> None:
    ref = spawn_span()
    with tracing.span("wake", links=genai.links(woken(why, ref))):
        pass
    (link,) = only(exported, "wake").links
    linked = (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}")
    assert linked == ids(only(exported, "execute_tool spawn_agent"))
    assert dict(link.attributes or {}) == {"teaspill.link": why}


def test_a_wake_with_no_spawn_behind_it_links_nowhere(exported: InMemorySpanExporter) -> None:
    assert genai.links(Message("hi")) == ()
    assert genai.links(Message("hi", parent=ParentRef("acme.parent", 1, "call-1"))) == ()
    assert tracing.link("not hex", "00f067aa0ba902b7") is None
    assert tracing.link("0" * 32, "0" * 16) is None, "all zeros is no span"


def test_without_tracing_the_spawn_step_returns_no_ids() -> None:
    assert spawn_span() == SpanRef("", "")
    assert tracing.link("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7") is None


def test_a_log_record_carries_the_ids_of_the_current_span(
    exported: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    logs.setup()
    log = logging.getLogger("services.observe.test")
    with caplog.at_level(logging.INFO, "services"):
        with tracing.span("wake"):
            log.info("inside")
        log.info("outside")
    inside, outside = caplog.records
    trace_id, span_id = ids(only(exported, "wake"))
    assert (inside.trace_id, inside.span_id) == (trace_id, span_id)  # type: ignore[attr-defined]
    assert (outside.trace_id, outside.span_id) == ("", "")  # type: ignore[attr-defined]
    line = logging.Formatter(logs.FORMAT).format(inside)
    assert line.endswith(
        f" INFO services.observe.test trace_id={trace_id} span_id={span_id} inside"
    )
    assert "trace_id" not in logging.Formatter(logs.FORMAT).format(outside)
