"""The tool registry: finds a tool by name and runs it inside a journaled step."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from schemas.chat import ToolCall, ToolDefinition
from schemas.effects import Finished
from schemas.harness import ToolResult, ToolStatus
from schemas.memory import MemorySearch, MemoryShown
from services.config import plugin
from services.effects.ledger import EffectLedger
from services.projection.searching import Where, search_memories
from services.tools.base import UNKNOWN_OUTCOME, Tool, ToolContext, ToolError, capped
from services.tools.builtin import BUILTIN_TOOLS
from services.tools.deadline import DEFAULT_SECONDS, OutcomeUnknownError, WithDeadline
from services.tools.memory import scopes

if TYPE_CHECKING:
    from services.mcp.hub import McpHub


log = logging.getLogger(__name__)
SHOWN_AT_TURN_START = 3
"""Memory records a turn's prompt shows at most."""


def crashed(name: str) -> str:
    """What the model reads when a tool raised something else than a `ToolError`: its
    message may be a library's, so it goes to the log, not to the model."""
    return (
        f"The tool {name} failed with an unexpected error; it said nothing the model can "
        "act on (the details are in the service's log)."
    )


class ToolRegistry:
    def __init__(
        self,
        tools: Iterable[Tool],
        home: Path,
        ledger: EffectLedger,
        mcp: McpHub | None = None,
        projection: Where | None = None,
    ) -> None:
        """`projection`: where the memory records are searched (the home's SQLite file
        unless given); `ledger` makes each call of a tool with `effects` happen at most once per
        idempotency key (`services/effects`); `mcp` lists and calls the operator's MCP
        servers' tools, which each turn finds anew (`services/mcp`)."""
        self._tools = {tool.definition.name: tool for tool in tools}
        self._home = home
        self._projection = projection or home / "projection.db"
        self._ledger = ledger
        self.mcp = mcp

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return tuple(sorted((t.definition for t in self._tools.values()), key=lambda d: d.name))

    def relevant(self, agent: str, text: str, user: str = "") -> MemoryShown:
        """The memory records most relevant to `text` in the agent's scopes (its own, the
        end user's when a user's message started the turn, and its tenant's), from the
        projection this process keeps."""
        search = MemorySearch(text, scopes(agent, user), SHOWN_AT_TURN_START)
        hits = search_memories(self._projection, search)
        return MemoryShown(tuple(hit.record for hit in hits))

    def has_effects(self, name: str) -> bool:
        """Whether the named tool changes the world (and so runs at most once)."""
        tool = self._tools.get(name)
        return tool is not None and tool.effects

    def run(
        self, call: ToolCall, key: str, agent: str, user: str = "", tenant_writes: bool = True
    ) -> ToolResult:
        """Run one call, stamped with when it ran (inside the journaled step, so a replay
        reads the same times). Never raises for the tool's own failures: they become
        results. `user` and `tenant_writes` are the turn's (`ToolContext`)."""
        started = time.time()  # noqa: TID251 - inside the journaled step
        result = self._run(call, ToolContext(agent, key, self._home, user, tenant_writes))
        finished = time.time()  # noqa: TID251 - inside the journaled step
        return msgspec.structs.replace(result, started=started, finished=finished)

    def _run(self, call: ToolCall, context: ToolContext) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            return _result(call, "error", f"No tool named {call.name!r} is installed.")
        if not tool.effects:
            return self._call(tool, call, context)
        key = context.idempotency_key
        claim = self._ledger.begin(key)
        if not claim.first:
            if claim.finished is None:
                return _result(call, "unknown", UNKNOWN_OUTCOME)
            return claim.finished.result
        result = self._call(tool, call, context)
        self._ledger.finish(key, Finished(result))
        return result

    def _call(self, tool: Tool, call: ToolCall, context: ToolContext) -> ToolResult:
        try:
            return _result(call, "ok", tool.call(call.arguments, context))
        except OutcomeUnknownError as error:
            return _result(call, "unknown", str(error))
        except ToolError as error:
            return _result(call, "error", str(error))
        except Exception:  # a tool's crash is reported to the model, its details logged
            log.exception("The tool %s raised (call %s)", call.name, call.id)
            return _result(call, "error", crashed(call.name))


def _result(call: ToolCall, status: ToolStatus, content: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, status=status, content=capped(content))


def load_tools(
    home: Path,
    modules: Iterable[str],
    ledger: EffectLedger,
    deadline: float = DEFAULT_SECONDS,
    mcp: McpHub | None = None,
    *,
    deployed: Iterable[Tool] = (),
    projection: Where | None = None,
) -> ToolRegistry:
    """The built-in tools, those the deployment makes (`deployed`: the memory tools, which
    need its addresses) and the `TOOLS` list of each named module, each call failing with
    a sentence after `deadline` seconds; `mcp`, the operator's MCP servers."""
    tools: list[Tool] = [*BUILTIN_TOOLS, *deployed]
    for name in modules:
        tools.extend(plugin(name, "TOOLS", "TEASPILL_TOOL_MODULES"))
    timed = [WithDeadline(tool, deadline) for tool in tools]
    return ToolRegistry(timed, home, ledger, mcp, projection)
