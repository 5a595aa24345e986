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


def anchors(path: Path) -> set[str]:
    """The anchors a page has: its headings as the renderer names them (lower case, words
    joined by hyphens, punctuation dropped, a repeat numbered), and any `<a id="...">`."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in re.sub(r"```.*?```", "", path.read_text(), flags=re.S).splitlines():
        found.update(re.findall(r'<a (?:id|name)="([^"]+)"', line))
        heading = re.match(r"#{1,6} (.*)", line)
        if heading is None:
            continue
        words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1).strip().lower())
        name = re.sub(r"[^\w\- ]", "", words).replace(" ", "-")
        repeat = seen.get(name, 0)
        seen[name] = repeat + 1
        found.add(f"{name}-{repeat}" if repeat else name)
    return found


def test_every_link_between_pages_reaches_its_page_and_section() -> None:
    broken = []
    for source in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", source.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            page_ = source.parent / name if name else source
            if not page_.exists():
                broken.append(f"{source.name}: {target} (no such file)")
            elif anchor and page_.suffix == ".md" and anchor not in anchors(page_):
                broken.append(f"{source.name}: {target} (no such section)")
    assert broken == []
