"""`python -m bench.workspace`: what the sandbox costs a command.

1. Overhead: one `true` in the sandbox (`run_sandboxed`: bwrap, the watchdog, the status
   pipe) against `/bin/sh -c true` started directly, and against the same bwrap command
   line started bare, taking turns, p50 and p95.
2. Throughput: AGENTS agents at once on a real stack (restate-server and the endpoint),
   each running a turn of COMMANDS `run_command` calls of `true` (scripted model), and
   commands per second over the whole run; and the same number of `Workspace.call`
   requests sent straight through ingress, AGENTS at a time (no agent, no model step).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import httpx
import msgspec

from bench.stats import Spread, spread
from schemas.chat import ToolCall
from schemas.events import ToolFinished, TurnEnded
from schemas.sandbox import CommandLimits
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message
from schemas.workspace import WorkspaceCall, WorkspaceReply
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Stack, isolated_settings
from services.workspace.files import open_workspace
from services.workspace.sandbox import Mounts, Pipes, bwrap_argv, prlimit_argv, run_sandboxed

JSON = {"content-type": "application/json"}


async def _direct() -> None:
    process = await asyncio.create_subprocess_exec("/bin/sh", "-c", "true")
    await process.wait()


async def overhead(home: Path, runs: int) -> dict[str, Spread]:
    workspace = open_workspace(home, "bench.overhead", 2**20)
    mounts = Mounts(workspace.root, workspace.uid)
    limits = CommandLimits()

    async def sandboxed() -> None:
        outcome = await run_sandboxed(
            mounts, "bwrap", "true", limits=limits, file_bytes=2**20, stopped=lambda: False
        )
        if outcome.exit_code != 0:
            raise SystemExit(f"the sandboxed `true` failed: {outcome}")

    async def bwrap_alone() -> None:
        pipes = Pipes.open(network=False)
        argv = bwrap_argv("bwrap", mounts, "true", pipes, prlimit_argv(limits, 2**20))
        process = await asyncio.create_subprocess_exec(*argv, pass_fds=pipes.for_bwrap())
        pipes.close_bwraps()
        await process.wait()
        os.close(pipes.status[0])

    timings: dict[str, list[float]] = {"direct": [], "bwrap": [], "sandboxed": []}
    runners = (("direct", _direct), ("bwrap", bwrap_alone), ("sandboxed", sandboxed))
    for _ in range(runs):
        for name, run in runners:
            started = time.perf_counter()
            await run()
            timings[name].append((time.perf_counter() - started) * 1000)
    return {name: spread(values) for name, values in timings.items()}


def turns(stack: Stack, agents: int, commands: int) -> float:
    spec = AgentSpec(
        kind="bench",
        instructions="Follow the script.",
        model="script",
        tools=("run_command",),
        limits=Limits(max_rounds=commands + 2),
    )
    step = {"calls": [{"name": "run_command", "arguments": {"command": "true"}}]}
    text = script(*[step] * commands, {"reply": "done"})
    ingress = Ingress(stack.settings.ingress_url)
    addresses = [f"bench.agent-{i}" for i in range(agents)]
    started = time.perf_counter()
    for address in addresses:
        ingress.send_wake(address, Message(text, spec=spec))
    for address in addresses:
        _wait_for_end(ingress, address, commands)
    took = time.perf_counter() - started
    ingress.close()
    return agents * commands / took


def _wait_for_end(ingress: Ingress, address: str, commands: int) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        events = ingress.timeline(address, 0, 1000).events
        ended = [e.body for e in events if isinstance(e.body, TurnEnded)]
        if ended:
            finished = [e.body for e in events if isinstance(e.body, ToolFinished)]
            if ended[0].outcome != "succeeded" or len(finished) != commands:
                raise SystemExit(f"{address}: the turn did not run every command: {ended[0]}")
            if any(f.status != "ok" for f in finished):
                raise SystemExit(f"{address}: a command failed: {finished}")
            return
        time.sleep(0.2)
    raise SystemExit(f"{address}: the turn did not end in 600 s")


async def calls(stack: Stack, agents: int, commands: int) -> float:
    url = f"{stack.settings.ingress_url}/Workspace/call"

    async def agent(client: httpx.AsyncClient, index: int) -> None:
        for number in range(commands):
            call = ToolCall(f"call_{number}", "run_command", {"command": "true"})
            request = WorkspaceCall(f"bench.direct-{index}", call, f"direct/{index}/{number}")
            body = msgspec.json.encode(request)
            response = await client.post(url, content=body, headers=JSON, timeout=60)
            response.raise_for_status()
            reply = msgspec.json.decode(response.content, type=WorkspaceReply)
            if reply.result.status != "ok":
                raise SystemExit(f"a direct call failed: {reply.result.content}")

    async with httpx.AsyncClient() as client:
        started = time.perf_counter()
        await asyncio.gather(*(agent(client, i) for i in range(agents)))
        return agents * commands / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.workspace", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="overhead samples per side")
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--commands", type=int, default=20, help="commands per agent")
    parser.add_argument("--overhead-only", action="store_true", help="skip the stack")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-") as home:
        spreads = asyncio.run(overhead(Path(home), args.runs))
        figures: dict[str, object] = {name: asdict(value) for name, value in spreads.items()}
        if not args.overhead_only:
            with Stack(isolated_settings(Path(home) / "stack")) as stack:
                figures["turns_commands_per_second"] = turns(stack, args.agents, args.commands)
                direct = asyncio.run(calls(stack, args.agents, args.commands))
                figures["workspace_calls_per_second"] = direct
            figures["agents"], figures["commands_per_agent"] = args.agents, args.commands
    json.dump(figures, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
