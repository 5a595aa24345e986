"""The hub against the test's own MCP server whose tool asks for input, without Restate: a
secret the server says back in its question is blanked before it is kept, and a request
state that holds one is not kept at all (it must go back exactly as it came)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schemas.chat import ToolCall
from services.effects.ledger import MemoryLedger
from services.mcp.config import Secret, Server
from services.mcp.hub import McpHub
from services.stack import free_port
from tests.fixtures.serving import start

TOKEN = "input-token-5e0c7d"  # noqa: S105 - a test value sought in the results


@pytest.fixture(scope="module")
def unsealed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("shop")
    port = free_port()
    process = start("tests.fixtures.mcp_input", port, str(folder), "unsealed")
    try:
        headers = {"X-Api-Token": Secret(env="TEST_INPUT_TOKEN")}
        yield Server("shop", url=f"http://127.0.0.1:{port}/mcp", headers=headers)
    finally:
        process.kill()
        process.wait()


def _asked(server: Server, item: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, object]:
    monkeypatch.setenv("TEST_INPUT_TOKEN", TOKEN)
    hub = McpHub({"shop": server}, MemoryLedger(), 20.0)
    tool = hub.catalog("acme", ("mcp:shop/*",)).find("mcp:shop/order")
    assert tool is not None
    result = hub.run(ToolCall("c1", "mcp:shop/order", {"item": item}), f"k/{item}", tool)
    return result.content, result.asked


def test_a_secret_said_back_in_a_question_is_blanked(
    unsealed: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    content, asked = _asked(unsealed, "token-tea", monkeypatch)
    assert TOKEN not in repr(asked)
    assert TOKEN not in content
    assert "(token [secret])" in content


def test_a_request_state_that_holds_a_secret_is_not_kept(
    unsealed: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    content, asked = _asked(unsealed, "state-token-tea", monkeypatch)
    assert asked is None
    assert content == (
        "The MCP tool order of shop put a configured secret in its request state, which "
        "would be journaled; the call could not go on."
    )
