"""docs/client.md's complete example runs as it stands, on a real stack with the real
bundled model, and says what the page says it does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from services.specs import load_spec
from tests.ui.conftest import UiStack

pytestmark = [pytest.mark.durable, pytest.mark.model]
ROOT = Path(__file__).resolve().parents[2]


def example() -> str:
    page = (ROOT / "docs" / "client.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    return str(code)


def test_the_complete_example_runs(ui_stack: UiStack, tmp_path: Path) -> None:
    with ui_stack.client() as api:
        api.publish(load_spec(ROOT / "examples" / "assistant.toml"))
    program = tmp_path / "example.py"
    program.write_text(example())
    env = {**os.environ, "TEASPILL_URL": ui_stack.url, "TEASPILL_KEY": ui_stack.keys["admin"]}
    done = subprocess.run(
        [sys.executable, str(program)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "[turn 1 succeeded]" in out
    reply = re.search(r"The reply: (.*)", out)
    assert reply
    assert reply.group(1).strip()
    assert reply.group(1).strip()[:20] in out.split("[turn 1")[0]  # printed live first
    assert "404: there is no agent acme.nobody-here: an agent comes to be" in out
    events = re.search(r"Events so far: (\d+)", out)
    assert events
    assert int(events.group(1)) >= 3
