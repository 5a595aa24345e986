"""The attributes of a model call's span and a tool call's, after OpenTelemetry's semantic
conventions for generative AI (`gen_ai.*`)."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry.trace import Link, Span

from schemas.chat import ToolCall
from schemas.model import ModelReply, ModelRequest
from schemas.wake import ChildReport, Message, SpanRef, Wake
from services.observe import tracing
from services.observe.tracing import Attributes


def model_request(name: str, request: ModelRequest) -> Attributes:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": name,
        "teaspill.agent": request.agent,
        "teaspill.turn": request.turn,
        "teaspill.round": request.round,
    }


def model_reply(span: Span | None, reply: ModelReply) -> None:
    """Tokens (prompt, served from the prompt cache, completion), the finish reason and the
    time to the first token, in seconds."""
    if span is None:
        return
    usage = reply.usage
    span.set_attributes(
        {
            "gen_ai.response.model": reply.model,
            "gen_ai.response.finish_reasons": (reply.finish_reason,),
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
            "gen_ai.server.time_to_first_token": reply.timing.first_token_seconds,
            "gen_ai.server.time_per_output_token": _per_token(reply.timing.tokens_per_second),
        }
    )


def wake(address: str, arrived: Wake) -> Attributes:
    """What woke the agent; for a child's message its parent, and for a child's report the
    child: restate-server starts a trace of its own for each one-way send, so these name the
    wake at the other end."""
    found: dict[str, str | int | float | bool] = {
        "teaspill.agent": address,
        "teaspill.wake": type(arrived).__name__,
    }
    if isinstance(arrived, Message) and arrived.parent is not None:
        found["teaspill.parent.agent"] = arrived.parent.address
        found["teaspill.parent.turn"] = arrived.parent.turn
    elif isinstance(arrived, ChildReport):
        found["teaspill.child.agent"] = arrived.child
        found["teaspill.child.turn"] = arrived.turn
    return found


def links(arrived: Wake) -> tuple[Link, ...]:
    """What a wake's span links to: for a child's message, and for the parent's wake on the
    child's report, the parent's span of the spawn (`teaspill.link` says which)."""
    span: SpanRef | None = None
    if isinstance(arrived, Message) and arrived.parent is not None:
        span, why = arrived.parent.span, "spawned by"
    elif isinstance(arrived, ChildReport):
        span, why = arrived.span, "reported to"
    made = tracing.link(span.trace_id, span.span_id, {"teaspill.link": why}) if span else None
    return (made,) if made else ()


async def spawned(parent: otel_context.Context | None, attributes: Attributes) -> SpanRef:
    """The spawn's span, made inside the spawn's journaled step, so once and never again on
    a replay; its ids, which the step journals, are the plain data the child's wake links
    to (empty when tracing is off)."""
    with tracing.span(f"execute_tool {attributes['gen_ai.tool.name']}", parent, attributes):
        ids = tracing.trace_ids()
    return SpanRef(*ids) if ids else SpanRef("", "")


def tool_call(call: ToolCall, agent: str, turn: int, round_: int) -> Attributes:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "teaspill.agent": agent,
        "teaspill.turn": turn,
        "teaspill.round": round_,
    }


def _per_token(tokens_per_second: float) -> float:
    return 1.0 / tokens_per_second if tokens_per_second > 0 else 0.0
