"""The operator's MCP servers as tool sources: a turn's catalog and its calls, each run
inside one of the agent's journaled steps.

Both run on the step's worker thread, on an event loop of their own (`asyncio.run`), so a
server that misbehaves holds up neither the endpoint's loop nor Restate's signals, and any
failure can be caught there and turned into a sentence. A call that is not read-only (by
its server's `readOnlyHint`) goes through the effect ledger: begun before it is sent,
its result recorded before the step returns, so a step run again after a crash mid-call
reports an unknown outcome instead of calling twice. A read-only call is simply sent
again.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import msgspec

from schemas.chat import ToolCall, ToolDefinition
from schemas.effects import Finished, leg_key
from schemas.harness import ToolResult, ToolStatus
from schemas.mcp import PREFIX, McpCatalog, McpTool
from schemas.questions import InputAnswer, InputAsked, Question
from services.effects.ledger import EffectLedger
from services.mcp.asking import MidCall, asked_of
from services.mcp.client import call_tool, connected, list_tools
from services.mcp.config import Secret, SecretMissingError, Server
from services.mcp.content import UNSAFE, Kept, content_text
from services.tools.base import UNKNOWN_OUTCOME, capped

log = logging.getLogger("teaspill.mcp")
NAME_PART = re.compile(r"^mcp:([a-z0-9][a-z0-9_-]{0,31})/(.+)\Z")


def server_of(name: str) -> str | None:
    """The server a granted name (`mcp:SERVER/TOOL` or `mcp:SERVER/*`) names, else None."""
    found = NAME_PART.match(name)
    return found.group(1) if found else None


class McpHub:
    def __init__(
        self,
        servers: Mapping[str, Server],
        ledger: EffectLedger,
        deadline: float,
        store: Path | None = None,
    ) -> None:
        """`store`: the artifact store that keeps what a tool answers that is not text;
        without one, such content is only named."""
        self._servers = dict(servers)
        self._store = store
        self._ledger = ledger
        self._deadline = deadline

    def granted_servers(self, tenant: str, grants: Iterable[str]) -> tuple[str, ...]:
        """The configured servers `grants` name that `tenant` may use, sorted."""
        named = {server_of(name) for name in grants} - {None}
        return tuple(
            sorted(s for s in named if s in self._servers and self._servers[s].allows(tenant))
        )

    def catalog(self, tenant: str, grants: tuple[str, ...]) -> McpCatalog:
        """Every tool of the servers the grants name (the model is shown only those the
        grants allow), listed at once; a server that fails is left out with a sentence."""
        names = self.granted_servers(tenant, grants)
        listed = asyncio.run(self._list_all(names))
        tools = tuple(
            sorted((t for found in listed if isinstance(found, tuple) for t in found), key=_name)
        )
        problems = tuple(found for found in listed if isinstance(found, str))
        return McpCatalog(tools, problems)

    async def _list_all(self, names: tuple[str, ...]) -> list[tuple[McpTool, ...] | str]:
        return list(await asyncio.gather(*(self._list(self._servers[n]) for n in names)))

    async def _list(self, server: Server) -> tuple[McpTool, ...] | str:
        try:
            with anyio.fail_after(self._deadline):
                async with connected(server, seconds=self._deadline) as client:
                    found = await list_tools(client)
        except Exception as error:  # noqa: BLE001 - on this step's own loop; worded below
            problem = self._problem(server, "listing its tools", error)
            return f"{problem} Its tools are not available this turn."
        return tuple(_tool(server.name, tool) for tool in found)

    def run(
        self, call: ToolCall, key: str, tool: McpTool, answer: InputAnswer | None = None
    ) -> ToolResult:
        """One call, or the call again with a person's `answer` to what it asked; never
        raising: a failure is a result the model reads. Stamped with when it ran (inside
        the journaled step, so a replay reads the same times). Each answered leg of a call
        is a send of its own in the ledger, keyed `KEY/inputN`."""
        started = time.time()  # noqa: TID251 - inside the journaled step
        leg = key if answer is None else leg_key(key, answer.asked.leg)
        result = self._run(call, leg, tool, answer)
        finished = time.time()  # noqa: TID251 - inside the journaled step
        return msgspec.structs.replace(result, started=started, finished=finished)

    def _run(
        self, call: ToolCall, key: str, tool: McpTool, answer: InputAnswer | None
    ) -> ToolResult:
        if tool.read_only:
            return self._send(call, key, tool, answer)
        claim = self._ledger.begin(key)
        if not claim.first:
            if claim.finished is None:
                return _result(call, "unknown", UNKNOWN_OUTCOME)
            return claim.finished.result
        result = self._send(call, key, tool, answer)
        self._ledger.finish(key, Finished(result))
        return result

    def _send(
        self, call: ToolCall, key: str, tool: McpTool, answer: InputAnswer | None
    ) -> ToolResult:
        server = self._servers.get(tool.server)
        if server is None:
            return _result(call, "error", f"The MCP server {tool.server} is no longer configured.")
        return asyncio.run(self._call(server, call, key, tool, answer))

    async def _call(
        self, server: Server, call: ToolCall, key: str, tool: McpTool, answer: InputAnswer | None
    ) -> ToolResult:
        mid_call = MidCall(server.name)
        try:
            with anyio.fail_after(self._deadline):
                async with connected(server, key, self._deadline, mid_call) as client:
                    found = await call_tool(
                        client, tool.tool, call.arguments, tool.definition.parameters, answer
                    )
        except TimeoutError:
            return self._late(call, tool)
        except Exception as error:  # noqa: BLE001 - on this step's own loop; worded below
            sent = not tool.read_only and not isinstance(error, SecretMissingError)
            status: ToolStatus = "unknown" if sent else "error"
            return _result(call, status, self._problem(server, f"calling {tool.tool}", error))
        if isinstance(found, mcp_types.InputRequiredResult):
            return self._asking(
                server, call, tool, asked_of(found, answer.asked.leg + 1 if answer else 1)
            )
        kept = Kept(self._store, f"mcp/{tool.server}/{_call_folder(key)}")
        text = self._scrub(
            server, "".join(f"{note}\n\n" for note in mid_call.notes) + content_text(found, kept)
        )
        return _result(call, "error" if found.is_error else "ok", text, kept)

    def _asking(
        self, server: Server, call: ToolCall, tool: McpTool, asked: InputAsked | str
    ) -> ToolResult:
        what = f"The MCP tool {tool.tool} of {server.name}"
        if isinstance(asked, str):
            return _result(call, "error", f"{what} {asked}; the call could not go on.")
        if asked.state is not None and self._scrub(server, asked.state) != asked.state:
            # the state goes back exactly as it came, so it cannot be blanked: not kept at all
            problem = "put a configured secret in its request state, which would be journaled"
            return _result(call, "error", f"{what} {problem}; the call could not go on.")
        try:
            scrubbed = msgspec.json.decode(
                self._scrub(server, msgspec.json.encode(asked.questions).decode()),
                type=dict[str, Question],
            )
        except msgspec.DecodeError:  # a secret that spans the JSON's own punctuation
            problem = "put a configured secret in its questions"
            return _result(call, "error", f"{what} {problem}; the call could not go on.")
        asked = msgspec.structs.replace(asked, questions=scrubbed)
        shown = "; ".join(q.message for q in asked.questions.values())
        waiting = f"{what} waits for a person's answer: {shown}"
        return msgspec.structs.replace(_result(call, "ok", waiting), asked=asked)

    def _late(self, call: ToolCall, tool: McpTool) -> ToolResult:
        what = (
            f"The MCP tool {tool.tool} of {tool.server} did not answer within its deadline "
            f"of {self._deadline:g} s"
        )
        if tool.read_only:
            return _result(call, "error", f"{what} and was given up.")
        return _result(
            call,
            "unknown",
            f"{what}, so it may or may not have taken effect. It was not run again.",
        )

    def _problem(self, server: Server, doing: str, error: Exception) -> str:
        """A sentence for the model; the log gets the error's kind and its scrubbed text."""
        log.warning(
            "MCP server %s failed %s: %s: %s",
            server.name,
            doing,
            type(error).__name__,
            self._scrub(server, str(error)),
        )
        if isinstance(error, SecretMissingError):
            return f"The MCP server {server.name} cannot be reached: {error}."
        name = server.name
        if isinstance(error, TimeoutError):
            return (
                f"The MCP server {name} did not answer within {self._deadline:g} s while {doing}."
            )
        return (
            f"The MCP server {name} failed while {doing}; it may be down or have answered with "
            "an error."
        )

    def _scrub(self, server: Server, text: str) -> str:
        """`text` with every secret value configured for `server` blanked out."""
        for value in (*server.env.values(), *server.headers.values()):
            if isinstance(value, Secret):
                try:
                    secret = value.value()
                except SecretMissingError:
                    continue
                if secret:
                    text = text.replace(secret, "[secret]")
        return text


def _tool(server: str, tool: mcp_types.Tool) -> McpTool:
    read_only = bool(tool.annotations and tool.annotations.read_only_hint)
    schema: dict[str, Any] = dict(tool.input_schema) or {"type": "object"}
    definition = ToolDefinition(f"{PREFIX}{server}/{tool.name}", tool.description or "", schema)
    return McpTool(definition, server, tool.name, read_only)


def _name(tool: McpTool) -> str:
    return tool.definition.name


def _call_folder(key: str) -> str:
    """`tTURN-rROUND-CALL` from the call's idempotency key (`ADDRESS/tN/rM/CALL`): call ids
    repeat from round to round, the key's last three parts do not."""
    return UNSAFE.sub("_", "-".join(key.split("/")[-3:]))


def _result(
    call: ToolCall, status: ToolStatus, content: str, kept: Kept | None = None
) -> ToolResult:
    artifacts = tuple(kept.artifacts) if kept is not None else ()
    return ToolResult(call.id, call.name, status, capped(content), artifacts=artifacts)
