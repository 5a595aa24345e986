"""What a turn saw of the operator's MCP servers: the catalog step's journaled result."""

from __future__ import annotations

import msgspec

from schemas.chat import ToolDefinition

PREFIX = "mcp:"
"""A granted MCP tool is named `mcp:SERVER/TOOL`; `mcp:SERVER/*` grants all of a server."""


class McpTool(msgspec.Struct, frozen=True):
    definition: ToolDefinition
    """As the model is shown it, named `mcp:SERVER/TOOL`."""
    server: str
    tool: str
    """The tool's own name on its server."""
    read_only: bool = False
    """The server's `readOnlyHint`: such a call may be retried; any other runs at most once."""


class McpCatalog(msgspec.Struct, frozen=True):
    tools: tuple[McpTool, ...] = ()
    problems: tuple[str, ...] = ()
    """One sentence per granted server that could not be listed (its tools are not shown)."""

    def find(self, name: str) -> McpTool | None:
        return next((tool for tool in self.tools if tool.definition.name == name), None)
