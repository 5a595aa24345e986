"""Per-model Prometheus metrics, from the `model_message` and `model_fallback` events.

Each model call records which model answered and how it went (tokens, queue wait, time
to first token, tokens/s); each fallback records which model failed. Durations are
Prometheus summaries (`_sum` and `_count`), so rates and means come out of PromQL.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.projection.tallies import Tallies

_FAMILIES = (
    ("model_calls_total", "counter", "Model calls answered, by the model that answered."),
    ("model_errors_total", "counter", "Model calls that failed and fell back to the next model."),
    ("model_fallbacks_total", "counter", "Rounds that left this model for the next of a chain."),
    ("model_queue_seconds", "summary", "Time model calls waited behind other agents' calls."),
    ("model_first_token_seconds", "summary", "Time from the start of a call to its first token."),
    ("model_tokens_per_second", "gauge", "Mean generation speed of the model's calls."),
    ("model_prompt_reuse_ratio", "gauge", "Share of prompt tokens served from the prompt cache."),
)


def render(tallies: Tallies) -> list[str]:
    calls = tallies.models
    failed = {str(model): int(str(count)) for model, count in tallies.fallbacks}
    models = sorted({str(row[0]) for row in calls} | set(failed))
    values: dict[str, list[str]] = {name: [] for name, _, _ in _FAMILIES}
    by_model = {str(row[0]): row for row in calls}
    for model in models:
        _add(values, model, by_model.get(model), failed.get(model, 0))
    lines: list[str] = []
    for name, kind, help_ in _FAMILIES:
        lines += [f"# HELP teaspill_{name} {help_}", f"# TYPE teaspill_{name} {kind}"]
        lines += values[name]
    return lines


def _add(
    values: dict[str, list[str]], model: str, row: Iterable[object] | None, failed: int
) -> None:
    count, prompt, cached, queue, first, rate = (
        (float(str(v)) for v in list(row)[1:]) if row is not None else (0.0,) * 6
    )
    label = '{model="' + model.replace("\\", "\\\\").replace('"', '\\"') + '"}'
    values["model_calls_total"].append(f"teaspill_model_calls_total{label} {int(count)}")
    values["model_errors_total"].append(f"teaspill_model_errors_total{label} {failed}")
    values["model_fallbacks_total"].append(f"teaspill_model_fallbacks_total{label} {failed}")
    for name, total in (("model_queue_seconds", queue), ("model_first_token_seconds", first)):
        values[name].append(f"teaspill_{name}_sum{label} {total!r}")
        values[name].append(f"teaspill_{name}_count{label} {int(count)}")
    values["model_tokens_per_second"].append(f"teaspill_model_tokens_per_second{label} {rate!r}")
    ratio = cached / prompt if prompt else 0.0
    values["model_prompt_reuse_ratio"].append(f"teaspill_model_prompt_reuse_ratio{label} {ratio!r}")
