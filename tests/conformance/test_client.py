"""The MCP conformance suite in client mode against teaspill's MCP client (the probe): each
scenario that concerns a client listing and calling tools, at each spec revision it
belongs to, with every check it makes passing and the named ones succeeding."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.suite import run_client

STATEFUL = "2025-11-25"
STATELESS = "2026-07-28"
PRESERVED = {
    "json-schema-2020-12-client-tool-found",
    "json-schema-2020-12-client-echo-completed",
    "json-schema-2020-12-client-$schema-preserved",
    "json-schema-2020-12-client-$defs-preserved",
    "json-schema-2020-12-client-additionalProperties-preserved",
    "sep-2106-client-composition-keywords-preserved",
    "sep-2106-client-conditional-keywords-preserved",
    "sep-2106-client-anchor-keyword-preserved",
}
SCENARIOS: list[tuple[str, str, set[str]]] = [
    ("initialize", STATEFUL, {"mcp-client-initialization"}),
    ("tools_call", STATEFUL, {"tool-add-numbers", "wire-schema-valid"}),
    ("tools_call", STATELESS, {"tool-add-numbers", "wire-schema-valid"}),
    (
        "sse-retry",
        STATEFUL,
        {"client-sse-graceful-reconnect", "client-sse-retry-timing", "client-sse-last-event-id"},
    ),
    (
        "request-metadata",
        STATELESS,
        {
            "sep-2575-http-client-sends-version-header",
            "sep-2575-client-populates-meta",
            "sep-2575-client-sends-client-info",
            "sep-2575-http-version-header-matches-meta",
            "sep-2575-client-retry-supported-version",
        },
    ),
    ("http-standard-headers", STATELESS, {"sep-2243-client-includes-standard-headers"}),
    (
        "http-custom-headers",
        STATELESS,
        {
            "sep-2243-client-supports-custom-headers",
            "sep-2243-client-mirrors-designated-params",
            "sep-2243-client-encode-values",
            "sep-2243-client-base64-unsafe",
            "sep-2243-client-omit-null",
        },
    ),
    (
        "http-invalid-tool-headers",
        STATELESS,
        {
            "sep-2243-client-reject-invalid-tool",
            "sep-2243-x-mcp-header-not-empty",
            "sep-2243-x-mcp-header-charset",
            "sep-2243-x-mcp-header-unique",
            "sep-2243-x-mcp-header-primitive-only",
        },
    ),
    ("json-schema-ref-no-deref", STATELESS, {"sep-2106-no-network-ref-deref"}),
    ("json-schema-2020-12-preservation", STATEFUL, PRESERVED),
    ("json-schema-2020-12-preservation", STATELESS, PRESERVED),
    (
        "sep-2322-client-request-state",
        STATELESS,
        {
            "sep-2322-client-request-state-echoed",
            "sep-2322-client-jsonrpc-id-different",
            "sep-2322-client-no-state-omitted",
            "sep-2322-client-parallel-isolation",
            "sep-2322-default-result-type-complete",
        },
    ),
    (
        "elicitation-sep1034-client-defaults",
        STATEFUL,
        {
            f"client-elicitation-sep1034-{kind}-default"
            for kind in ("string", "integer", "number", "enum", "boolean")
        },
    ),
]


@pytest.mark.parametrize(
    ("scenario", "version", "succeeding"),
    SCENARIOS,
    ids=[f"{scenario}@{version}" for scenario, version, _ in SCENARIOS],
)
def test_the_client_passes(
    scenario: str, version: str, succeeding: set[str], tmp_path: Path
) -> None:
    outcome = run_client(scenario, version, tmp_path)
    assert outcome.failed() == {}, outcome.output
    assert succeeding <= outcome.succeeded(), outcome.output


def test_a_result_without_result_type_reaches_the_model_as_complete(tmp_path: Path) -> None:
    """The suite checks only that the client did not call again; the model must also read
    what the tool answered (the SDK alone refuses such a result)."""
    outcome = run_client("sep-2322-client-request-state", STATELESS, tmp_path)
    assert outcome.failed() == {}, outcome.output
    printed = next(tmp_path.glob("*/stdout.txt")).read_text()
    assert '"content":"no-result-type-test-ok"' in printed, printed
    assert '"content":"echo-state-ok"' in printed, printed
