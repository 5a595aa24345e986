"""What a deployment offers specs: the names of its models and tools, read from the
settings the way the endpoint reads them (without loading a model or opening a ledger)."""

from __future__ import annotations

import importlib

from schemas.sandbox import Ceilings, SandboxPolicy
from schemas.workspace import WORKSPACE_TOOL_NAMES
from services.executor.registry import default_models
from services.harness.builtins import ASK_USER
from services.harness.registry import BUILTIN_HARNESSES
from services.mcp.config import load_servers
from services.settings import Settings
from services.specs import Offer
from services.tools.builtin import BUILTIN_TOOLS
from services.tools.knowledge import SEARCH_DOCS
from services.tools.memory import MEMORY_TOOL_NAMES


def deployment_offer(settings: Settings) -> Offer:
    tools = {tool.definition.name for tool in BUILTIN_TOOLS} | {*WORKSPACE_TOOL_NAMES, ASK_USER}
    tools |= {*MEMORY_TOOL_NAMES, SEARCH_DOCS}
    for name in settings.tool_modules:
        tools.update(tool.definition.name for tool in importlib.import_module(name).TOOLS)
    models = default_models(settings, settings.model_modules)
    servers = load_servers(settings.mcp_servers_file)
    return Offer(
        harnesses=harness_names(settings),
        models=tuple(sorted(models.names())),
        tools=tuple(sorted(tools)),
        problem=models.problem or "",
        sandbox=sandbox_policy(settings),
        mcp={name: server.tenants for name, server in servers.items()},
    )


def harness_names(settings: Settings) -> tuple[str, ...]:
    """The harnesses specs may name: the built-ins and those of the harness modules (which
    the endpoint checks as it starts)."""
    names = set(BUILTIN_HARNESSES)
    for name in settings.harness_modules:
        names.update(importlib.import_module(name).HARNESSES)
    return tuple(sorted(names))


def sandbox_policy(settings: Settings) -> SandboxPolicy:
    """The operator's grants and ceilings for workspaces, from the settings."""
    ceilings = Ceilings(
        quota_mb=settings.workspace_max_quota_mb,
        wall_seconds=settings.workspace_max_wall_seconds,
        cpu_seconds=settings.workspace_max_cpu_seconds,
        memory_mb=settings.workspace_max_memory_mb,
        processes=settings.workspace_max_processes,
        output_bytes=settings.workspace_max_output_bytes,
    )
    return SandboxPolicy(frozenset(settings.network_tenants), ceilings)
