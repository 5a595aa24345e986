"""Every example in README.md and docs/*.md runs, so a page that drifts from the code
fails the build. How a page marks its blocks: tests/doc_examples.py."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.evals.suite import load_suite
from services.specs import load_spec
from tests.doc_examples import DEFAULT_PORT, RUN, SHOWN, Block, blocks, every_block, pages
from tests.doc_sandbox import Sandbox

BLOCKS = every_block()


def by_language(*languages: str) -> list[Block]:
    return [b for b in BLOCKS if b.runs and b.language in languages]


def ids(found: list[Block]) -> list[str]:
    return [b.where for b in found]


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    try:
        yield box
    finally:
        box.close()


def test_every_block_says_what_it_is() -> None:
    unnamed = [b.where for b in BLOCKS if b.language not in RUN | SHOWN]
    assert unnamed == [], f"name each fence's language, one of {sorted(RUN | SHOWN)}"


def test_a_block_left_out_says_why() -> None:
    left_out = [b for b in BLOCKS if b.skipped is not None]
    assert all(len(b.skipped or "") >= 10 for b in left_out), ids(left_out)
    assert len(left_out) <= len(by_language("sh", "python", "toml", "json", "jsonl")) // 4


@pytest.mark.parametrize("block", by_language("json"), ids=ids(by_language("json")))
def test_json_examples_parse(block: Block) -> None:
    json.loads(block.text)


@pytest.mark.parametrize("block", by_language("jsonl"), ids=ids(by_language("jsonl")))
def test_json_lines_examples_parse(block: Block) -> None:
    for line in filter(None, block.text.splitlines()):
        json.loads(line)


@pytest.mark.parametrize("block", by_language("toml"), ids=ids(by_language("toml")))
def test_toml_examples_parse_and_specs_load(block: Block, tmp_path: Path) -> None:
    """A block with a `kind` is a spec, one with `cases` an eval file: each is loaded."""
    parsed = tomllib.loads(block.text)
    if "kind" in parsed:
        path = tmp_path / "spec.toml"
        path.write_text(block.text)
        load_spec(path)
    if "cases" in parsed:
        path = tmp_path / "evals.toml"
        path.write_text(block.text)
        load_suite(path)


@pytest.mark.parametrize("block", by_language("python"), ids=ids(by_language("python")))
def test_python_examples_run(block: Block, sandbox: Sandbox) -> None:
    path = sandbox.run_python(block)
    module = path.relative_to(sandbox.directory).with_suffix("").as_posix().replace("/", ".")
    checked = subprocess.run(
        [sys.executable, "-m", "tests.plugin_check", module],
        cwd=sandbox.directory,
        env=sandbox.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, f"{block.where}: {checked.stderr}"


@pytest.mark.parametrize("block", by_language("js"), ids=ids(by_language("js")))
def test_js_examples_are_named_run_by_their_page_and_parse(block: Block, tmp_path: Path) -> None:
    assert block.file_name is not None, f"{block.where}: name the file (`// name.mjs`)"
    assert block.run_by_shell(), f"{block.where}: no sh block of the page runs it"
    path = tmp_path / block.file_name
    path.write_text(block.text)
    checked = subprocess.run(
        ["node", "--check", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0, f"{block.where}: {checked.stderr}"


def run_by_a_shell(block: Block) -> bool:
    return block.runs and (block.language == "sh" or block.run_by_shell())


SHELLED = [b for b in BLOCKS if run_by_a_shell(b)]


@pytest.mark.parametrize("block", SHELLED, ids=ids(SHELLED))
def test_shell_examples_take_addresses_from_the_variables(block: Block) -> None:
    """A user on other ports runs them as they stand (the sandbox's shell is that user)."""
    assert DEFAULT_PORT.search(block.text) is None, (
        f"{block.where}: use $TEASPILL_GATEWAY_URL, $TEASPILL_INGRESS_URL, $TEASPILL_ADMIN_URL "
        '(`eval "$(.venv/bin/teaspill env)"`) or a TEASPILL_*_PORT variable'
    )


def shell_pages() -> list[Path]:
    return [p for p in pages() if any(b.runs and b.language == "sh" for b in blocks(p))]


@pytest.mark.durable
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", shell_pages(), ids=lambda p: p.name)
def test_shell_examples_run_in_order(page: Path, sandbox: Sandbox) -> None:
    """The page's python and js blocks are written first (its sh blocks may use them),
    then each sh block runs against what the blocks before it started."""
    for block in blocks(page):
        if block.runs and block.language == "python":
            sandbox.run_python(block)
        if block.runs and block.language == "js":
            sandbox.write_file(block)
    for block in blocks(page):
        if block.runs and block.language == "sh":
            sandbox.run_shell(block)
