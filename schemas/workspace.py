"""Workspaces: what an agent's spec says about its working directory and sandbox, the
built-in workspace tools, and the values that cross the durable boundary to the
`Workspace` service on the execution plane."""

from __future__ import annotations

import re

import msgspec

from schemas.chat import ToolCall, ToolDefinition
from schemas.harness import Artifact, ToolResult
from schemas.sandbox import WorkspaceSettings

_COMMAND_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string", "maxLength": 8000}},
    "required": ["command"],
}
RUN_COMMAND = ToolDefinition(
    "run_command",
    "Run a shell command in your workspace (a sandbox: no network, limited time and "
    "memory). Returns its exit status and output.",
    _COMMAND_SCHEMA,
)
RUN_COMMAND_NETWORKED = ToolDefinition(
    "run_command",
    "Run a shell command in your workspace (a sandbox with outbound network access to "
    "public addresses, limited time and memory). Returns its exit status and output.",
    _COMMAND_SCHEMA,
)
"""`run_command` as a spec with `workspace.network` shows it."""
READ_FILE = ToolDefinition(
    "read_file",
    "Read a text file from your workspace.",
    {
        "type": "object",
        "properties": {"path": {"type": "string", "maxLength": 500}},
        "required": ["path"],
    },
)
WRITE_FILE = ToolDefinition(
    "write_file",
    "Write a text file in your workspace (replacing it if it exists).",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": 500},
            "content": {"type": "string", "maxLength": 1_000_000},
        },
        "required": ["path", "content"],
    },
)
LIST_FILES = ToolDefinition(
    "list_files",
    "List the files in your workspace, or in one of its folders.",
    {"type": "object", "properties": {"path": {"type": "string", "maxLength": 500}}},
)
WORKSPACE_TOOLS = (LIST_FILES, READ_FILE, RUN_COMMAND, WRITE_FILE)
"""Granted by name in a spec like every tool; run by the `Workspace` service."""
WORKSPACE_TOOL_NAMES = frozenset(tool.name for tool in WORKSPACE_TOOLS)


def workspace_tools(*, network: bool) -> tuple[ToolDefinition, ...]:
    """The workspace tools as a spec shows them: `run_command` says whether its sandbox
    has the network."""
    if not network:
        return WORKSPACE_TOOLS
    return (LIST_FILES, READ_FILE, RUN_COMMAND_NETWORKED, WRITE_FILE)


class WorkspaceCall(msgspec.Struct, frozen=True):
    """The input of `Workspace.call`: one workspace tool call of one agent."""

    agent: str
    call: ToolCall
    idempotency_key: str
    """A command runs at most once per key, even across crashes."""
    settings: WorkspaceSettings = WorkspaceSettings()
    lent_by: str | None = None
    """The parent whose workspace this agent may read, at /parent."""


class WorkspaceReply(msgspec.Struct, frozen=True):
    result: ToolResult
    artifacts: tuple[Artifact, ...] = ()
    """Files the call created or changed, in path order."""


SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


def artifact_name(sha256: str) -> str | None:
    """Where an artifact lives in the content-addressed store, relative to it (the first
    two hex digits, then the digest); None for a string that is not a sha256."""
    return f"{sha256[:2]}/{sha256}" if SHA256.match(sha256) else None
