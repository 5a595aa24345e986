"""`python -m bench.mcp [--calls N] [--turns T]`: what an MCP tool call costs through a
turn, beside calling the same server directly with the `mcp` SDK.

A stack with two servers: the test's own over streamable HTTP (`tests.fixtures.mcp_server`,
tool `headers`) and `mcp-server-time` over stdio (`get_current_time`). For each, a turn of
N rounds, each calling the tool once, against a turn of N rounds calling the built-in
`calculator`: the difference per round is what the MCP call adds to a round. Beside it,
the same call made directly: on a fresh connection each time (what a step does) and on
one open session (a long-lived client). Milliseconds, the median of T turns or calls.

Then a catalog of `--catalog` tools (`tests.fixtures.mcp_catalog`, streamable HTTP): the
hub's listing as a turn's catalog step makes it (a fresh connection, every page, the
definitions built), the same listing on an open SDK session, and a one-round turn whose
spec grants the whole server against the same turn granting no MCP tool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from schemas.spec import AgentSpec, Limits
from services.effects.ledger import MemoryLedger
from services.executor.scripted import script
from services.ingress import Ingress
from services.mcp.client import call_tool, connected, list_tools
from services.mcp.config import Server, load_servers
from services.mcp.hub import McpHub
from services.stack import Stack, free_port, isolated_settings
from tests.fixtures.serving import start

TOOLS = {
    "local": ("headers", {}),
    "time": ("get_current_time", {"timezone": "UTC"}),
}


def _servers(folder: Path, port: int, bulk_port: int) -> Path:
    path = folder / "mcp.toml"
    path.write_text(
        f'[servers.local]\nurl = "http://127.0.0.1:{port}/mcp"\n\n'
        f'[servers.bulk]\nurl = "http://127.0.0.1:{bulk_port}/mcp"\n\n'
        f"[servers.time]\ncommand = {json.dumps(sys.executable)}\n"
        'args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]\n'
    )
    return path


def _turn(name: str, arguments: dict[str, Any], calls: int) -> str:
    rounds = [{"calls": [{"name": name, "arguments": arguments}]} for _ in range(calls)]
    return script(*rounds, {"reply": "done"})


def _timed(run: Callable[[], object], times: int) -> float:
    took = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


def _through_turns(ingress: Ingress, server: str, calls: int, turns: int) -> tuple[float, float]:
    tool, arguments = TOOLS[server]
    spec = AgentSpec(
        kind="bench-mcp",
        instructions="Follow the script.",
        model="script",
        tools=(f"mcp:{server}/{tool}", "calculator"),
        limits=Limits(max_rounds=calls + 1),
    )
    counter = iter(range(1_000_000))

    def turn(text: str) -> None:
        result = ingress.message(f"bench.mcp-{server}-{next(counter)}", text, spec)
        assert result.status.last_outcome == "succeeded", result

    mcp_turn = _turn(f"mcp:{server}/{tool}", arguments, calls)
    calc_turn = _turn("calculator", {"expression": "1+1"}, calls)
    turn(mcp_turn)  # warm up: imports, the first connection
    return _timed(lambda: turn(mcp_turn), turns) / calls, _timed(
        lambda: turn(calc_turn), turns
    ) / calls


def _direct(server: Server, times: int) -> tuple[float, float]:
    tool, arguments = TOOLS[server.name]

    async def fresh() -> None:
        async with connected(server) as client:
            await call_tool(client, tool, arguments)

    async def session() -> float:
        async with connected(server) as client:
            await call_tool(client, tool, arguments)
            took = []
            for _ in range(times):
                started = time.perf_counter()
                await call_tool(client, tool, arguments)
                took.append(time.perf_counter() - started)
            return statistics.median(took) * 1000

    return _timed(lambda: asyncio.run(fresh()), times), asyncio.run(session())


def _catalog(ingress: Ingress, server: Server, size: int, times: int) -> list[float]:
    hub = McpHub({server.name: server}, MemoryLedger(), 60.0)
    grants = (f"mcp:{server.name}/*",)
    listed = hub.catalog("bench", grants)
    assert len(listed.tools) == size, listed.problems
    step = _timed(lambda: hub.catalog("bench", grants), times)

    async def session() -> float:
        async with connected(server) as client:
            await list_tools(client)
            took = []
            for _ in range(times):
                started = time.perf_counter()
                await list_tools(client)
                took.append(time.perf_counter() - started)
            return statistics.median(took) * 1000

    counter = iter(range(1_000_000))

    def turn(tools: tuple[str, ...]) -> None:
        spec = AgentSpec(kind="bench-catalog", instructions="Reply.", model="script", tools=tools)
        text = script({"reply": "done"})
        result = ingress.message(f"bench.catalog-{next(counter)}", text, spec)
        assert result.status.last_outcome == "succeeded", result

    turn(grants)  # warm up
    granted = _timed(lambda: turn(grants), times)
    plain = _timed(lambda: turn(("calculator",)), times)
    return [step, asyncio.run(session()), granted, plain]


def _serve(module: str, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    return start(module, port, *args), port


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp", description=__doc__)
    parser.add_argument("--calls", type=int, default=10, help="MCP calls per turn (default 10)")
    parser.add_argument("--turns", type=int, default=5, help="turns per figure (default 5)")
    parser.add_argument(
        "--catalog", type=int, default=100, help="tools in the listed catalog (default 100)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        local, port = _serve("tests.fixtures.mcp_server", str(folder))
        bulk, bulk_port = _serve("tests.fixtures.mcp_catalog", str(args.catalog))
        try:
            servers_file = _servers(folder, port, bulk_port)
            settings = isolated_settings(folder / "home", mcp_servers_file=servers_file)
            servers = load_servers(servers_file)
            print(
                "server transport  round+MCP  round+calculator  MCP in a turn  direct fresh  "
                "direct session"
            )
            with Stack(settings, gateway=False), closing(Ingress(settings.ingress_url)) as ingress:
                for name, transport in (("local", "http"), ("time", "stdio")):
                    with_mcp, with_calc = _through_turns(ingress, name, args.calls, args.turns)
                    fresh, session = _direct(servers[name], args.turns * args.calls)
                    print(
                        f"{name:6} {transport:9} {with_mcp:9.1f}  {with_calc:16.1f}  "
                        f"{with_mcp - with_calc:13.1f}  {fresh:12.1f}  {session:14.1f}"
                    )
                figures = _catalog(ingress, servers["bulk"], args.catalog, args.turns)
            step, session, granted, plain = figures
            print(
                f"\ncatalog of {args.catalog} tools: catalog step {step:.1f}  "
                f"SDK session list_tools {session:.1f}  "
                f"turn granting it {granted:.1f}  turn without MCP {plain:.1f}  "
                f"difference {granted - plain:.1f}"
            )
        finally:
            for process in (local, bulk):
                process.kill()
                process.wait()


if __name__ == "__main__":
    main()
