"""The results as a small table for people and as JSON for tools."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.results import Result
from services.stack import StackError, find_restate_server


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "restate_server": _restate_version(),
        "commit": _commit(),
    }


def _commit() -> str:
    """The checked-out commit (uncommitted changes are not reflected)."""
    try:
        answer = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return answer.stdout.strip()


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor()


def _restate_version() -> str:
    try:
        binary = find_restate_server()
        answer = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, check=True, timeout=30
        )
    except (StackError, OSError, subprocess.SubprocessError):
        return "unknown"
    return answer.stdout.strip().removeprefix("restate-server ").strip()


def render(results: Sequence[Result], about: dict[str, Any]) -> str:
    header = (
        f"Round overhead (model `script`, tool `calculator`) on {about['cores']} cores,"
        f" restate-server {about['restate_server']}, commit {about['commit']}"
    )
    return "\n\n".join([header, _main_table(results), _gap_table(results), _cpu_table(results)])


def _main_table(results: Sequence[Result]) -> str:
    rows = [
        [
            r.benchmark,
            str(r.agents),
            str(r.turns_per_agent),
            str(r.rounds_per_turn),
            _ms(r.per_round.median_ms),
            _ms(r.per_round.p95_ms),
            _ms(r.in_agent.median_ms),
            f"{r.rounds_per_second:.1f}",
            f"{r.projected_after_s:.2f}",
        ]
        for r in results
    ]
    head = ["benchmark", "agents", "turns", "rounds", "ms/round p50", "p95", "in agent p50"]
    return table([*head, "rounds/s", "projected +s"], rows)


def _gap_table(results: Sequence[Result]) -> str:
    rows = [
        [
            r.benchmark,
            _ms(r.gaps.append.median_ms),
            _ms(r.gaps.tool.median_ms),
            _ms(r.gaps.model.median_ms),
            _ms(r.gaps.model.p95_ms),
        ]
        for r in results
    ]
    head = ["a calculator round, p50 ms", "append", "tool+append", "model+append", "model p95"]
    return table(head, rows)


def _cpu_table(results: Sequence[Result]) -> str:
    rows = [
        [r.benchmark, _ms(r.cpu.restate_ms), _ms(r.cpu.endpoint_ms), _ms(r.cpu.client_ms)]
        for r in results
    ]
    return table(["CPU ms per round", "restate-server", "endpoint", "bench client"], rows)


def table(head: list[str], rows: list[list[str]]) -> str:
    """Left-aligned first column, right-aligned numbers, a rule under the header."""
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    return "\n".join([line(head), "  ".join("-" * w for w in widths), *map(line, rows)])


def _ms(value: float) -> str:
    return f"{value:.1f}"


def write_json(path: Path, results: Sequence[Result], about: dict[str, Any]) -> None:
    document = {"machine": about, "results": [dataclasses.asdict(r) for r in results]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
