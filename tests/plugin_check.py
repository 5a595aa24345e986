"""`python -m tests.plugin_check MODULE`: load a plugin module from the docs the way the
services do, and use what it offers the way they do (a model answers one request, a
harness runs one turn), so a documented plugin that no longer fits the interface fails the
build."""

from __future__ import annotations

import asyncio
import importlib
import sys
import tempfile
from pathlib import Path

from schemas.chat import ChatMessage
from schemas.harness import TurnState
from schemas.model import ModelRequest
from schemas.spec import AgentSpec
from services.agent.harnesses import load_harnesses
from services.agent.observers import load_observers
from services.effects.ledger import MemoryLedger
from services.executor.registry import default_models
from services.executor.scripted import follow_directives
from services.harness.inprocess import run_in_process
from services.harness.loop import TurnInput
from services.settings import load_settings
from services.tools.builtin import CALCULATOR
from services.tools.registry import load_tools


def check(module: str) -> list[str]:
    """What the module offers, each used once; a sentence per thing."""
    loaded = importlib.import_module(module)
    said: list[str] = []
    if hasattr(loaded, "TOOLS"):
        with tempfile.TemporaryDirectory() as home:
            names = [d.name for d in load_tools(Path(home), [module], MemoryLedger()).definitions()]
        said.append(f"tools: {', '.join(names)}")
    if hasattr(loaded, "OBSERVERS"):
        said.append(f"{len(load_observers([module]))} observers")
    for name in getattr(loaded, "HARNESSES", {}):
        said.append(f"harness {name}: {_turn(module, name)}")
    for name in getattr(loaded, "MODELS", {}):
        said.append(f"model {name}: {asyncio.run(_ask(module, name))!r}")
    return said


def _turn(module: str, name: str) -> str:
    """One turn of harness `name` in process, on the scripted model: how it ended."""
    spec = AgentSpec("check", "Be brief.", model="script", tools=("calculator",), harness=name)
    turn = TurnState(1, spec, (ChatMessage("user", "Say hello."),))
    given = TurnInput("check.harness", turn, (), (CALCULATOR.definition,))
    harness = load_harnesses([module])[name]
    last = run_in_process(given, follow_directives, harness=harness).commands[-1]
    return str(last)


async def _ask(module: str, name: str) -> str:
    models = default_models(load_settings(), [module])
    try:
        request = ModelRequest(name, (ChatMessage("user", "Say hello."),), max_tokens=16)
        reply = await models.runner(name).generate(request)
    finally:
        models.close()
    return reply.message.content


if __name__ == "__main__":
    for line in check(sys.argv[1]):
        sys.stdout.write(f"{line}\n")
