"""The docs mirror the code: every setting, tool and event is documented."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from schemas.events import EventBody
from services.harness.builtins import BUILTIN_DEFINITIONS
from services.settings import Settings
from services.tools.builtin import BUILTIN_TOOLS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text()


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_documented(field: str) -> None:
    assert f"`TEASPILL_{field.upper()}`" in page("operations.md")


@pytest.mark.parametrize(
    "tool", [t.definition.name for t in BUILTIN_TOOLS] + [d.name for d in BUILTIN_DEFINITIONS]
)
def test_every_built_in_tool_is_documented(tool: str) -> None:
    assert f"`{tool}`" in page("tools.md")


def event_tags() -> list[str]:
    union = msgspec.inspect.type_info(EventBody)
    assert isinstance(union, msgspec.inspect.UnionType)
    return [str(t.tag) for t in union.types if isinstance(t, msgspec.inspect.StructType)]


@pytest.mark.parametrize("tag", event_tags())
def test_every_event_type_is_documented(tag: str) -> None:
    assert f"`{tag}`" in page("agents.md")


@pytest.mark.parametrize("columns", ["60", "100", "200"])
def test_the_cli_reference_is_generated_from_the_cli(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the width of the terminal that runs the command the hint names."""
    from services.cli.reference import PAGE, render  # noqa: PLC0415

    monkeypatch.setenv("COLUMNS", columns)
    assert PAGE.read_text() == render(), "run `python -m services.cli.reference`"


def documented_commands() -> set[tuple[str, ...]]:
    pages = [ROOT / "README.md", *DOCS.glob("*.md")]
    found: set[tuple[str, ...]] = set()
    for path in pages:
        for match in re.finditer(r"teaspill ((?:[a-z]+ ?){1,2})", path.read_text()):
            found.add(tuple(match.group(1).split()))
    return found


def test_every_teaspill_command_the_docs_show_exists() -> None:
    from services.cli.main import parser  # noqa: PLC0415

    def known(words: tuple[str, ...]) -> bool:
        cli = parser()
        try:
            cli.parse_known_args([*words, "--help"])
        except SystemExit as exit_:
            return exit_.code == 0
        return True

    shown = documented_commands()
    assert shown
    unknown = sorted(words for words in shown if not known(words[:1]))
    assert unknown == []
