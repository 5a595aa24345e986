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
    """The revision to run at; '' for an extension's scenario, which belongs to none."""
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
# The Tasks scenarios (an extension: they run on the stateless revision) drive fixture
# tools of their own (greet, slow_compute, failing_job, protocol_error_job, confirm_delete,
# multi_input) with their own arguments and no message, so none of those calls makes a
# task here: every check that needs such a task is named below as failing. What the
# gateway's Tasks do with a real turn (created, polled, answered, cancelled, through a
# SIGKILL) is shown with the SDK's client in tests/gateway/test_mcp_tasks.py.
WIRE = frozenset({"wire-schema-valid"})
TASKS = [
    Expected(
        "tasks-lifecycle",
        "",
        WIRE,
        frozenset(
            {
                "tasks-sync-tool-call",
                "sep-2663-result-type-task-on-create",
                "sep-2663-tasks-get-status-working",
                "sep-2663-tasks-get-status-completed",
                "sep-2663-tool-error-uses-completed-status",
                "sep-2663-tasks-get-status-failed",
                "sep-2663-cancel-ack-empty-result",
                "tasks-cancel-terminal-idempotent-ack",
            }
        ),
    ),
    Expected(
        "tasks-capability-negotiation",
        "",
        WIRE
        | {
            "tasks-extension-advertised",
            "sep-2663-tasks-methods-non-declaring",
            "sep-2663-server-rejects-undeclared-client",
        },
        frozenset({"tasks-per-request-meta-opt-in"}),
    ),
    Expected(
        "tasks-wire-fields",
        "",
        WIRE,
        frozenset(
            {
                "tasks-wire-field-renames",
                "tasks-no-early-ttl-expiry",
                "tasks-no-related-task-meta-on-inlined-result",
            }
        ),
    ),
    Expected(
        "tasks-request-state-removal", "", WIRE, frozenset({"tasks-request-state-removal-setup"})
    ),
    Expected(
        "tasks-mrtr-input",
        "",
        WIRE,
        frozenset(
            {
                "sep-2663-tasks-get-status-input-required",
                "tasks-mrtr-tasks-update-resumes",
                "tasks-mrtr-partial-fulfillment",
            }
        ),
    ),
    Expected(
        "tasks-request-headers",
        "",
        WIRE | {"tasks-headers-reject-mismatched-method"},
        frozenset(
            {
                "tasks-headers-tolerate-mcp-method-on-tools-call",
                "sep-2663-routing-headers-accepted-on-tasks-get",
                "sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get",
            }
        ),
    ),
    Expected(
        "tasks-dispatch-and-envelope",
        "",
        WIRE
        | {
            "sep-2663-tasks-result-removed-method-not-found",
            "tasks-removed-tasks-list",
            "sep-2663-tasks-get-invalid-task-id-32602",
        },
        frozenset(
            {
                "tasks-server-directed-creation-no-hint",
                "sep-2663-legacy-task-param-ignored",
                "tasks-immediate-result-shortcut",
                "tasks-result-type-complete-on-non-task-responses",
                "sep-2663-durable-create-strong-consistency",
            }
        ),
    ),
    Expected(
        "tasks-required-task-error",
        "",
        WIRE,
        frozenset({"sep-2663-server-returns-missing-capability-when-required"}),
    ),
    Expected(
        "tasks-mrtr-composition",
        "",
        WIRE,
        frozenset({"sep-2663-mrtr-synchronous-before-task-creation"}),
    ),
]


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with (
        gateway_stack(tmp_path_factory.mktemp("conformance-home")) as stack,
        keyed_proxy(f"{stack.gateway.url}/mcp", stack.key) as url,
    ):
        yield url


@pytest.mark.parametrize(
    "expected",
    SCENARIOS + TASKS,
    ids=[f"{e.scenario}@{e.version or 'extension'}" for e in SCENARIOS + TASKS],
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
