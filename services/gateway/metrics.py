"""Prometheus metrics, computed from the projection on each scrape (all tenants).

Counters are totals over every recorded event, so they survive gateway restarts and agree
between gateway replicas. Token usage is read from the `model_message` events' JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import get_args

from services.gateway import model_metrics
from services.gateway.models import AgentStatusName
from services.gateway.reader import ProjectionReader

OUTCOMES = ("succeeded", "stopped", "failed", "superseded")
"""How a turn ends; parked is a status a turn rests in, never an ending."""
STATUSES: tuple[str, ...] = get_args(AgentStatusName)
"""Every status an agent is listed by, each shown (at 0 when no agent has it)."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def render(projection: ProjectionReader) -> str:
    tallies = await projection.read(lambda store: store.tallies())
    turns = _by_label(tallies.turns, OUTCOMES)
    rounds, prompt, completion, cached = tallies.rounds
    tool_errors = tallies.tool_errors
    agents = _by_label(tallies.agents, STATUSES)
    ratio = cached / prompt if prompt else 0.0
    lines = [
        *_family("turns_total", "counter", "Turns ended, by outcome.", "outcome", turns),
        *_family(
            "rounds_total",
            "counter",
            "Model calls recorded (model_message events).",
            "",
            {"": rounds},
        ),
        *_family(
            "model_tokens_total",
            "counter",
            "Model tokens: prompt, completion, and prompt tokens served from the cache.",
            "kind",
            {"prompt": prompt, "completion": completion, "cached": cached},
        ),
        *_family(
            "prompt_cache_reuse_ratio",
            "gauge",
            "Share of prompt tokens served from the prompt cache (cached / prompt).",
            "",
            {"": ratio},
        ),
        *_family(
            "errors_total",
            "counter",
            "Failed turns plus tool calls that ended in an error.",
            "",
            {"": turns.get("failed", 0) + tool_errors},
        ),
        *_family("agents", "gauge", "Agents in the catalog, by status.", "status", agents),
        *model_metrics.render(tallies),
    ]
    return "\n".join(lines) + "\n"


def _by_label(rows: Iterable[tuple[object, ...]], known: tuple[str, ...]) -> dict[str, int]:
    counts = dict.fromkeys(known, 0)
    for label, count in rows:
        counts[str(label)] = counts.get(str(label), 0) + int(str(count))
    return counts


def _family(name: str, kind: str, help_: str, label: str, values: Mapping[str, float]) -> list[str]:
    full = f"teaspill_{name}"
    lines = [f"# HELP {full} {help_}", f"# TYPE {full} {kind}"]
    for value_label, value in values.items():
        where = f'{{{label}="{value_label}"}}' if label else ""
        lines.append(f"{full}{where} {_number(value)}")
    return lines


def _number(value: float) -> str:
    return repr(value) if isinstance(value, float) else str(value)
