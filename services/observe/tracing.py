"""Traces over OTLP: one setup per process, and the spans teaspill makes.

Nothing is set up unless `TEASPILL_OTLP_ENDPOINT` names a collector: every helper here then
returns at once, so a deployment without a collector pays for no span. With one, spans go
to a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 spans) that a thread of the SDK's
batch processor exports over OTLP/HTTP every second (`EXPORT_DELAY_MS`). A span that finds the
queue full is dropped; a collector that is down or slow costs that thread its retries,
never a request or a turn: tracing fails open.

Spans of a Restate handler hang directly under the span restate-server made for the
invocation's attempt (its `traceparent` in the attempt's headers), which restate-server
ends even when the endpoint dies mid-attempt: a step's span exported before a SIGKILL keeps
its parent, where a parent in this process (the wake's) would never be exported. A span for
a journaled step is made inside the step's function, which a replay never runs again: a
step completed in an earlier attempt has its span there, and no second one.

A one-way send starts a trace of its own in restate-server. A wake that a spawn started
links to the parent's span of the spawn (`link`), whose ids travel in the child's message
as plain data, journaled by the spawn's step.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import (
    Link,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from restate.context import Request

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

EXPORT_DELAY_MS = 1000
"""How long an ended span waits for its export at the most (the SDK's default is 5 s): a
step's span is out of the process within it, so a SIGKILL later does not take it along.
Exporting each span the moment it ends cost a round about 11 ms in `python -m
bench.tracing`; every second, the endpoint spends the same CPU a round as every 5 s
(within 1 ms). `OTEL_BSP_SCHEDULE_DELAY` (milliseconds) sets another."""
EXPORT_TIMEOUT_SECONDS = 5.0
"""How long one export may take before the batch is dropped (the exporter's own retries
stay within it)."""

Attributes = Mapping[str, str | int | float | bool]

_tracer: Tracer | None = None
_provider: TracerProvider | None = None


def setup(endpoint: str, service: str) -> bool:
    """Export this process's spans to the OTLP/HTTP collector at `endpoint` (its base URL;
    `/v1/traces` is added) as `service`. An empty endpoint sets up nothing. Returns whether
    spans are exported."""
    if not endpoint or _provider is not None:
        return _provider is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    exporter = OTLPSpanExporter(
        endpoint=f"{endpoint.rstrip('/')}/v1/traces", timeout=EXPORT_TIMEOUT_SECONDS
    )
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    delay = None if "OTEL_BSP_SCHEDULE_DELAY" in os.environ else EXPORT_DELAY_MS
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=delay))
    install(provider)
    log.info("Traces go to %s as %s", endpoint, service)
    return True


def install(provider: TracerProvider) -> None:
    """Make this process's spans with `provider` (`setup` installs one that exports over
    OTLP; a test, one with an exporter of its own); `shutdown` undoes it."""
    global _tracer, _provider
    _provider, _tracer = provider, provider.get_tracer("teaspill")


def shutdown() -> None:
    """Export what is queued (within the exporter's timeout) and stop."""
    global _tracer, _provider  # noqa: PLW0603
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def enabled() -> bool:
    return _tracer is not None


def extracted(headers: Mapping[str, str]) -> otel_context.Context | None:
    """The trace context W3C `traceparent` headers carry, when tracing is on."""
    if _tracer is None:
        return None
    return propagate.extract(headers)


def inject(headers: dict[str, str]) -> None:
    """Add the current span's `traceparent` to outgoing headers (nothing when off)."""
    if _tracer is not None:
        propagate.inject(headers)


def current() -> otel_context.Context | None:
    """The current trace context, to hand to work done on another thread."""
    return otel_context.get_current() if _tracer is not None else None


@contextmanager
def span(
    name: str,
    parent: otel_context.Context | None = None,
    attributes: Attributes | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    links: Sequence[Link] = (),
) -> Iterator[Span | None]:
    """A span, current while the block runs, under `parent` (else the current span), linked
    to `links`; None when tracing is off. An exception that leaves the block marks the span
    failed."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(
        name, context=parent, kind=kind, attributes=attributes, links=links
    ) as made:
        yield made


def link(trace_id: str, span_id: str, attributes: Attributes | None = None) -> Link | None:
    """A link to the span these hex ids name (made in another trace, or another process);
    None when tracing is off or the ids are not a span's."""
    if _tracer is None:
        return None
    try:
        context = SpanContext(
            int(trace_id, 16), int(span_id, 16), True, TraceFlags(TraceFlags.SAMPLED)
        )
    except ValueError:
        return None
    return Link(context, attributes) if context.is_valid else None


def traced(
    name: str,
    parent: otel_context.Context | None,
    attributes: Attributes,
    fn: Callable[P, T],
) -> Callable[P, T]:
    """`fn`, run inside a span under `parent`: for a step's function, which runs only when
    the step runs (never on a replay). `fn` itself when tracing is off."""
    if _tracer is None:
        return fn

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with span(name, parent, attributes):
            return fn(*args, **kwargs)

    return run


def failed(made: Span | None, sentence: str) -> None:
    """Mark a span failed with a sentence (a refusal that raised nothing)."""
    if made is not None:
        made.set_status(Status(StatusCode.ERROR, sentence))


def trace_ids() -> tuple[str, str] | None:
    """The current trace and span ids in hex, for a log line; None outside a span."""
    found = trace.get_current_span().get_span_context()
    if not found.is_valid:
        return None
    return f"{found.trace_id:032x}", f"{found.span_id:016x}"


class _Attempted(Protocol):
    def request(self) -> Request: ...


def attempt(ctx: _Attempted) -> otel_context.Context | None:
    """The trace context of a Restate handler's attempt: the `traceparent` restate-server
    sends with it, under its own span of the attempt (None when tracing is off, or when
    restate-server traces nothing and sends none)."""
    if _tracer is None:
        return None
    headers = ctx.request().attempt_headers
    return propagate.extract(headers) if "traceparent" in headers else None
