"""The MCP conformance suite in server mode against the gateway's `/mcp`, on a real stack
(tenant acme with its kind `calc` published). The suite cannot send a header of its own, so
it reaches the gateway through a local proxy that adds acme's key to every request.

Some of the suite's checks call fixture tools of its own that a server under test is
expected to carry. The gateway's tools are its tenant's agent kinds: for the Tasks
scenarios the tenant publishes kinds named for the fixture tools `greet`, `slow_compute`,
`failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input` and
`test_tool_with_task`, each declaring the tool's input and task support and run by a model
that does what the tool does (tests.fixtures.models): `failing_job`'s turn fails within its
own limits (a tool error), `protocol_error_job`'s model step fails (a protocol error), and
the last three ask the suite's own forms with `ask_user`. A call of
a fixture tool no kind plays (`test_simple_text`, ...) is answered with a tool error whose
sentence names the missing message: where a check reads only the shape of a result (text content,
`isError`) it passes on that answer, and the test says so. The checks that fail are named
below, each with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conformance.keyed import keyed_proxy
from tests.conformance.suite import run_server
from tests.gateway.test_stack import gateway_stack

pytestmark = pytest.mark.durable

STATEFUL = "2025-11-25"
STATELESS = "2026-07-28"
NO_CLIENT_CAPABILITY = (
    "a request that needs a capability the client did not declare must be refused with "
    "-32021; the suite asks this of its fixture tool that needs sampling, and no tool of the "
    "gateway needs a client capability"
)


class Expected(NamedTuple):
    scenario: str
    version: str
    """The revision to run at; '' for an extension's scenario, which belongs to none."""
    succeeding: frozenset[str]
    """Checks that must succeed (so a scenario that checks nothing cannot pass)."""
    failing: dict[str, str] = {}  # noqa: RUF012 - read, never changed
    """The checks that fail, and only they, each with the reason."""


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
        {
            "sep-2575-server-rejects-undeclared-capability": NO_CLIENT_CAPABILITY,
            "sep-2575-missing-capability-http-400": NO_CLIENT_CAPABILITY,
        },
    ),
    Expected("tools-list", STATEFUL, frozenset({"tools-list", "tools-name-format"})),
    Expected("tools-list", STATELESS, frozenset({"tools-list", "tools-name-format"})),
    Expected("tools-call-simple-text", STATEFUL, frozenset({"tools-call-simple-text"})),
    Expected("tools-call-simple-text", STATELESS, frozenset({"tools-call-simple-text"})),
    Expected("tools-call-error", STATEFUL, frozenset({"tools-call-error"})),
    Expected("tools-call-error", STATELESS, frozenset({"tools-call-error"})),
]
# The Tasks scenarios are an extension's: they run on the stateless revision.
WIRE = frozenset({"wire-schema-valid"})
TASKS = [
    Expected(
        "tasks-lifecycle",
        "",
        WIRE
        | {
            "sep-2663-result-type-task-on-create",
            "sep-2663-tasks-get-status-working",
            "sep-2663-tasks-get-status-completed",
            "sep-2663-tool-error-uses-completed-status",
            "sep-2663-tasks-get-status-failed",
            "sep-2663-cancel-ack-empty-result",
            "tasks-cancel-terminal-idempotent-ack",
            "tasks-sync-tool-call",
        },
    ),
    Expected(
        "tasks-capability-negotiation",
        "",
        WIRE
        | {
            "tasks-extension-advertised",
            "sep-2663-tasks-methods-non-declaring",
            "sep-2663-server-rejects-undeclared-client",
            "tasks-per-request-meta-opt-in",
        },
    ),
    Expected(
        "tasks-wire-fields",
        "",
        WIRE
        | {
            "tasks-wire-field-renames",
            "tasks-no-early-ttl-expiry",
            "tasks-no-related-task-meta-on-inlined-result",
        },
    ),
    Expected(
        "tasks-request-state-removal",
        "",
        WIRE | {"tasks-create-result-no-request-state", "tasks-get-detailed-no-request-state"},
    ),
    Expected(
        "tasks-mrtr-input",
        "",
        WIRE
        | {
            "sep-2663-tasks-get-status-input-required",
            "tasks-mrtr-tasks-update-resumes",
            "tasks-mrtr-partial-fulfillment",
        },
    ),
    Expected(
        "tasks-request-headers",
        "",
        WIRE
        | {
            "tasks-headers-reject-mismatched-method",
            "sep-2663-routing-headers-accepted-on-tasks-get",
            "tasks-headers-tolerate-mcp-method-on-tools-call",
            "sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get",
        },
    ),
    Expected(
        "tasks-dispatch-and-envelope",
        "",
        WIRE
        | {
            "sep-2663-tasks-result-removed-method-not-found",
            "tasks-removed-tasks-list",
            "sep-2663-tasks-get-invalid-task-id-32602",
            "tasks-server-directed-creation-no-hint",
            "tasks-immediate-result-shortcut",
            "sep-2663-durable-create-strong-consistency",
            "sep-2663-legacy-task-param-ignored",
            "tasks-result-type-complete-on-non-task-responses",
        },
    ),
    Expected(
        "tasks-required-task-error",
        "",
        WIRE
        | {
            "sep-2663-server-returns-missing-capability-when-required",
            "sep-2663-server-returns-missing-capability-data-shape",
        },
    ),
    Expected(
        "tasks-mrtr-composition",
        "",
        WIRE | {"sep-2663-mrtr-synchronous-before-task-creation"},
    ),
]


def _fixture(
    kind: str, properties: dict[str, Any], required: list[str], tasks: str
) -> dict[str, Any]:
    """A kind playing the suite's fixture tool `kind`: its input is the tool's arguments,
    its task support the tool's, and its model (tests.fixtures.models) does what the tool
    does."""
    return {
        "kind": kind,
        "instructions": f"Do what the tool {kind} does.",
        "model": kind,
        "input": {"type": "object", "properties": properties, "required": required},
        "task_support": tasks,
    }


FIXTURE_KINDS = [
    _fixture("greet", {"name": {"type": "string"}}, ["name"], "forbidden"),
    _fixture(
        "slow_compute",
        {"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}},
        ["seconds"],
        "optional",
    ),
    {
        **_fixture("failing_job", {}, [], "required"),
        "tools": ["calculator"],
        "limits": {"max_rounds": 1},
    },
    _fixture("protocol_error_job", {}, [], "optional"),
    {
        **_fixture("confirm_delete", {"filename": {"type": "string"}}, ["filename"], "optional"),
        "tools": {"ask_user": "allow"},
    },
    {**_fixture("multi_input", {}, [], "optional"), "tools": {"ask_user": "allow"}},
    {
        **_fixture("test_tool_with_task", {}, [], "required"),
        "tools": {"ask_user": "allow"},
        "input_before_task": True,
    },
]


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("conformance-home")
    with (
        gateway_stack(home, model_modules=("tests.fixtures.models",)) as stack,
        keyed_proxy(f"{stack.gateway.url}/mcp", stack.key) as url,
    ):
        for spec in FIXTURE_KINDS:
            published = stack.http.post("/v1/specs", json=spec, headers=stack.auth)
            assert published.status_code == 201, published.text
        yield url


@pytest.mark.parametrize(
    "expected",
    SCENARIOS + TASKS,
    ids=[f"{e.scenario}@{e.version or 'extension'}" for e in SCENARIOS + TASKS],
)
def test_the_gateway_passes(mcp_url: str, expected: Expected, tmp_path: Path) -> None:
    outcome = run_server(mcp_url, expected.scenario, expected.version, tmp_path)
    assert set(outcome.failed()) == set(expected.failing), outcome.output
    assert expected.succeeding <= outcome.succeeded(), outcome.output


def test_a_cancelled_task_settles_as_cancelled(mcp_url: str, tmp_path: Path) -> None:
    """The lifecycle's cancel check reads only the acknowledgement; the task it cancels (a
    60 s slow_compute) must also end cancelled, not completed."""
    outcome = run_server(mcp_url, "tasks-lifecycle", "", tmp_path)
    details = outcome.details_of("sep-2663-cancel-ack-empty-result")
    assert details["statusAfterCancel"] == "cancelled", outcome.output


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
