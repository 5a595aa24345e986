"""Writes docs/cli.md from the CLI's own parser: `python -m services.cli.reference`.
A test fails when the committed page is stale."""

from __future__ import annotations

import argparse
from pathlib import Path

from services.cli.main import parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
WIDTH = 100
"""The page's width, whatever the terminal that writes it (argparse follows $COLUMNS)."""


def _commands(
    cli: argparse.ArgumentParser, prefix: str
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(prefix, cli)]
    for action in cli._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{prefix} {name}")
    return found


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=WIDTH)


def render() -> str:
    parts = [
        "# `teaspill` command reference\n",
        "Generated from the CLI by `python -m services.cli.reference`; do not edit.\n",
    ]
    for name, command in _commands(parser(), "teaspill")[1:]:
        command.prog = name
        command.formatter_class = _formatter
        parts.append(f"## `{name}`\n\n```text\n{command.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    PAGE.write_text(render())
