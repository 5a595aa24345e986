"""The workspace host's file tools: off the event loop, under their deadline."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.chat import ToolCall
from schemas.sandbox import WorkspaceSettings
from schemas.workspace import WorkspaceCall
from services.workspace import files
from services.workspace.tools import WorkspaceHost


@pytest.fixture
def stuck(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """File operations that block until released (a file system that hangs)."""
    release = threading.Event()

    def hang(*_args: object) -> str:
        release.wait()
        return "late"

    for name in ("read_text", "write_text", "list_entries"):
        monkeypatch.setattr(files, name, hang)
    yield release
    release.set()


def perform(host: WorkspaceHost, name: str, arguments: dict[str, object]) -> tuple[str, str]:
    call = WorkspaceCall("acme.a", ToolCall("call_0", name, arguments), "key", WorkspaceSettings())

    async def run() -> tuple[str, str]:
        ticks = 0

        async def tick() -> None:  # the event loop stays free while the call waits
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        reply = await host.perform(call, lambda: False)
        ticker.cancel()
        assert ticks > 10
        return reply.result.status, reply.result.content

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("read_file", {"path": "a.txt"}, ("error", "read_file did not finish within its deadline")),
        ("list_files", {}, ("error", "list_files did not finish within its deadline of 0.3 s.")),
        (
            "write_file",
            {"path": "a.txt", "content": "x"},
            ("unknown", "The file may or may not have been written."),
        ),
    ],
)
def test_a_file_tool_that_hangs_fails_at_its_deadline(
    tmp_path: Path,
    stuck: threading.Event,
    name: str,
    arguments: dict[str, object],
    expected: tuple[str, str],
) -> None:
    status, content = perform(WorkspaceHost(tmp_path, "bwrap", deadline=0.3), name, arguments)
    assert status == expected[0]
    assert expected[1] in content
