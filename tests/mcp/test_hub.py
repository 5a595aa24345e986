"""The hub against a real MCP server process (the test's own, over streamable HTTP) and
against one that is not there: deadlines, a server that is down, the ledger. No Restate:
the ledger is the in-memory one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.chat import ToolCall
from services.effects.ledger import MemoryLedger
from services.mcp.config import Server
from services.mcp.hub import McpHub
from services.stack import free_port
from tests.fixtures.serving import start

DEADLINE = 1.0


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("mcp")
    port = free_port()
    process = start("tests.fixtures.mcp_server", port, str(folder))
    try:
        yield Server("local", url=f"http://127.0.0.1:{port}/mcp")
    finally:
        process.kill()
        process.wait()


def _hub(*servers: Server) -> McpHub:
    return McpHub({s.name: s for s in servers}, MemoryLedger(), DEADLINE)


def test_the_catalog_lists_a_granted_server_sorted_with_its_hints(local: Server) -> None:
    catalog = _hub(local).catalog("acme", ("mcp:local/*",))
    names = [t.definition.name for t in catalog.tools]
    assert names == ["mcp:local/headers", "mcp:local/slow_read", "mcp:local/slow_write"]
    assert [t.read_only for t in catalog.tools] == [True, True, False]
    assert catalog.problems == ()


def test_a_server_the_tenant_may_not_use_is_not_listed(local: Server) -> None:
    only = Server(local.name, url=local.url, tenants=frozenset({"acme"}))
    assert _hub(only).catalog("other", ("mcp:local/*",)).tools == ()


def test_a_call_past_its_deadline_is_a_sentence_and_a_side_effect_unknown(local: Server) -> None:
    hub = _hub(local)
    tools = {t.tool: t for t in hub.catalog("acme", ("mcp:local/*",)).tools}
    read = hub.run(
        ToolCall("c1", "mcp:local/slow_read", {"note": "late-r"}), "k1", tools["slow_read"]
    )
    assert read.status == "error"
    assert f"did not answer within its deadline of {DEADLINE:g} s" in read.content
    write = hub.run(
        ToolCall("c2", "mcp:local/slow_write", {"note": "late-w"}), "k2", tools["slow_write"]
    )
    assert write.status == "unknown"
    assert "may or may not have taken effect" in write.content
    again = hub.run(
        ToolCall("c2", "mcp:local/slow_write", {"note": "late-w"}), "k2", tools["slow_write"]
    )
    assert (again.status, again.content) == (write.status, write.content), "the ledger's answer"


def test_a_server_that_is_down_is_a_sentence(tmp_path: Path) -> None:
    gone = Server("gone", url=f"http://127.0.0.1:{free_port()}/mcp")
    hub = _hub(gone)
    catalog = hub.catalog("acme", ("mcp:gone/*",))
    assert catalog.tools == ()
    (problem,) = catalog.problems
    assert problem == (
        "The MCP server gone failed while listing its tools; it may be down or have answered "
        "with an error. Its tools are not available this turn."
    )
