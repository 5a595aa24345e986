"""The MCP conformance suite in server mode against the gateway's `/mcp`, on a real stack
(tenant acme with its kind `calc` published). The suite cannot send a header of its own, so
it reaches the gateway through a local proxy that adds acme's key to every request.

Some of the suite's checks call fixture tools of its own (`test_simple_text`,
`test_missing_capability`, ...) that a server under test is expected to carry. The
gateway's tools are its tenant's agent kinds, each taking a `message`: a call of a fixture
tool is answered with a tool error whose sentence names the missing message. Where a check
reads only the shape of a result (text content, `isError`) it passes on that answer, and
the test says so; where it needs the fixture's own behaviour it cannot pass against any
product server, and the test names it as expected to fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conformance.keyed import keyed_proxy
from tests.conformance.suite import run_server
from tests.gateway.test_stack import gateway_stack

pytestmark = pytest.mark.durable

STATEFUL = "2025-11-25"
STATELESS = "2026-07-28"
FIXTURE_CAPABILITY = frozenset(
    {
        # a request that needs a capability the client did not declare must be refused with
        # -32021; the suite asks this of its fixture tool that needs sampling, and no tool of
        # the gateway needs a client capability
        "sep-2575-server-rejects-undeclared-capability",
        "sep-2575-missing-capability-http-400",
    }
)


class Expected(NamedTuple):
    scenario: str
    version: str
    succeeding: frozenset[str]
    """Checks that must succeed (so a scenario that checks nothing cannot pass)."""
    fixture_only: frozenset[str] = frozenset()
    """Checks that need one of the suite's fixture tools: they fail, and only they."""


SCENARIOS = [
    Expected("server-initialize", STATEFUL, frozenset({"server-initialize", "wire-schema-valid"})),
    Expected(
        "server-stateless",
        STATELESS,
        frozenset(
            {
                "sep-2575-server-implements-discover",
                "sep-2575-server-identifies-in-result-meta",
                "sep-2575-request-meta-invalid-missing-meta",
                "sep-2575-server-unsupported-version-error",
                "sep-2575-http-server-header-mismatch-400",
                "sep-2575-http-server-method-not-found-404",
                "sep-2575-http-server-error-jsonrpc-id",
            }
        ),
        FIXTURE_CAPABILITY,
    ),
    Expected("tools-list", STATEFUL, frozenset({"tools-list", "tools-name-format"})),
    Expected("tools-list", STATELESS, frozenset({"tools-list", "tools-name-format"})),
    Expected("tools-call-simple-text", STATEFUL, frozenset({"tools-call-simple-text"})),
    Expected("tools-call-simple-text", STATELESS, frozenset({"tools-call-simple-text"})),
    Expected("tools-call-error", STATEFUL, frozenset({"tools-call-error"})),
    Expected("tools-call-error", STATELESS, frozenset({"tools-call-error"})),
]


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with (
        gateway_stack(tmp_path_factory.mktemp("conformance-home")) as stack,
        keyed_proxy(f"{stack.gateway.url}/mcp", stack.key) as url,
    ):
        yield url


@pytest.mark.parametrize(
    "expected", SCENARIOS, ids=[f"{e.scenario}@{e.version}" for e in SCENARIOS]
)
def test_the_gateway_passes(mcp_url: str, expected: Expected, tmp_path: Path) -> None:
    outcome = run_server(mcp_url, expected.scenario, expected.version, tmp_path)
    assert set(outcome.failed()) == expected.fixture_only, outcome.output
    assert expected.succeeding <= outcome.succeeded(), outcome.output


@pytest.mark.parametrize("version", [STATEFUL, STATELESS])
def test_a_fixture_tool_call_is_a_tool_error_naming_the_message(
    mcp_url: str, version: str, tmp_path: Path
) -> None:
    """What tools-call-simple-text and tools-call-error passed on: the gateway's answer to
    a call without a message, as text content with isError."""
    outcome = run_server(mcp_url, "tools-call-simple-text", version, tmp_path)
    result = outcome.details_of("tools-call-simple-text")["result"]
    assert result["isError"] is True
    assert [block["type"] for block in result["content"]] == ["text"]
    assert result["content"][0]["text"].startswith("message: ")
