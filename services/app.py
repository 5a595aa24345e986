"""The composition root: the one place that knows every service.

`create_app()` serves both planes from one endpoint (the embedded default): hypercorn
builds it with `python -m hypercorn 'services.app:create_app()'`, so importing this
module builds nothing. To serve the planes apart, so that an operator can restart or
scale either alone, point two servers at `services.app:create_app(execution=False)` and
`services.app:create_app(control=False)`.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import restate

from services.agent.harnesses import load_harnesses
from services.agent.object import agent_object
from services.agent.observers import load_observers
from services.agent.pipeline import TenantQuotas
from services.config import check
from services.contracts import REMEMBER
from services.effects.ledger import RestateLedger
from services.effects.object import effects_object
from services.executor.live import http_post
from services.executor.registry import default_models
from services.executor.runner import ModelRunner
from services.executor.service import model_service
from services.hooks.object import hooks
from services.hooks.tenant import tenant_hooks
from services.ingress import AsyncIngress, Ingress
from services.knowledge.object import knowledge
from services.lifecycle.archive import CatalogArchives, FolderArchive, TimelinesInArchive
from services.lifecycle.erasure import lifecycle_object
from services.lifespan import ASGIApp, Closer, with_shutdown
from services.mcp.config import load_servers
from services.mcp.hub import McpHub
from services.memory.object import memory
from services.observe import logs, tracing
from services.offer import deployment_offer, sandbox_policy
from services.projection.notify import Notifier
from services.projection.projector import Projection, Tell, projector_service, through_ingress
from services.schedules.object import schedules
from services.schedules.tenant import tenant_schedules
from services.settings import ConfigError, Settings, settings
from services.stack.identity import accepted_keys
from services.tenant.object import offer_specs
from services.tenant.usage import tenant_usage
from services.tools.knowledge import search_docs_tool
from services.tools.memory import remember_tool, search_tool
from services.tools.registry import load_tools
from services.workspace.service import workspace_service
from services.workspace.tools import WorkspaceHost
from services.workspace.volumes import (
    DiskUnavailableError,
    MountedElsewhereError,
    Volumes,
    prepare,
)

Services = list[restate.Service | restate.VirtualObject]


def _notifier(config: Settings, closers: list[Closer]) -> Tell | None:
    """Who the projector tells of new events: the gateways, when a token is set."""
    if not config.notify_secret:
        return None
    client = httpx.AsyncClient()
    notifier = Notifier(config.notify_targets, config.notify_secret, client)
    closers.append(notifier.close)
    closers.append(client.aclose)
    return notifier.tell


def _control(services: Services, closers: list[Closer], model: ModelRunner | None) -> None:
    config = settings()
    ingress = AsyncIngress(config.ingress_url)
    closers.append(ingress.close)
    projection = Projection(
        config.home / "projection.db",
        _notifier(config, closers),
        through_ingress(ingress),
        url=config.projection_url,
    )
    offer = deployment_offer(config)
    ledger = RestateLedger(config.ingress_url)
    closers.append(lambda: asyncio.to_thread(ledger.close))
    deadline = config.tool_deadline_seconds
    servers = load_servers(config.mcp_servers_file)
    hub = McpHub(servers, ledger, deadline, config.home / "artifacts")
    where = config.projection_url or config.home / "projection.db"
    scopes = Ingress(config.ingress_url)
    closers.append(lambda: asyncio.to_thread(scopes.close))
    deployed = (
        remember_tool(lambda note: scopes.call(REMEMBER, note, note.scope.key)),
        search_tool(where),
        search_docs_tool(where),
    )
    tools = load_tools(
        config.home, config.tool_modules, ledger, deadline, hub, deployed=deployed, projection=where
    )
    services += [
        agent_object(
            tools,
            projection,
            load_observers(config.observer_modules),
            model,
            offer,
            quotas=TenantQuotas(config.tenant_daily_tokens, agents=True),
            queue_limit=config.agent_queue,
            harnesses=load_harnesses(config.harness_modules),
            archives=CatalogArchives(FolderArchive(config.home / "archive"), projection),
            keep_chunks=config.timeline_keep_chunks,
        ),
        offer_specs(offer),
        schedules,
        hooks,
        tenant_hooks,
        tenant_schedules,
        tenant_usage,
        projector_service(
            projection,
            config.ingress_url,
            config.admin_url,
            TimelinesInArchive(FolderArchive(config.home / "archive")),
        ),
        lifecycle_object(
            projection,
            config.admin_url,
            FolderArchive(config.home / "archive"),
            config.archive_idle_days,
            timedelta(seconds=config.key_cache_seconds),
        ),
        memory,
        knowledge,
    ]
    closers.insert(0, projection.close)


def _execution(services: Services, closers: list[Closer]) -> ModelRunner:
    config = settings()
    client = httpx.AsyncClient()
    models = default_models(config, config.model_modules, client)
    token = config.live_token
    live = [http_post(url, token, client) for url in config.live_targets] if token else []
    runner = ModelRunner(models, live, config.local_only_tenants)
    services.append(model_service(runner))
    closers.append(lambda: asyncio.to_thread(runner.close))
    closers.append(client.aclose)
    ledger = RestateLedger(config.ingress_url)
    closers.append(lambda: asyncio.to_thread(ledger.close))
    host = WorkspaceHost(
        config.home,
        config.bwrap,
        sandbox_policy(config),
        tmp_mb=config.sandbox_tmp_mb,
        reserve_mb=config.disk_reserve_mb,
        deadline=config.tool_deadline_seconds,
        allowed=config.allowed,
        volumes=_volumes(config, closers),
    )
    services += [workspace_service(host, ledger)]
    kept = config.effect_retention_seconds
    services += [effects_object(timedelta(seconds=kept) if kept else None)]
    return runner


def _volumes(config: Settings, closers: list[Closer]) -> Volumes | None:
    """The workspaces' filesystem (`services.workspace.volumes`), mounted before the plane
    serves anything; `image` mode without it stops the endpoint with a sentence."""
    try:
        volumes = prepare(config.home, config.workspace_disk, config.workspace_image_mb)
    except MountedElsewhereError as error:
        raise ConfigError(f"The execution plane cannot start: {error}.") from None
    except DiskUnavailableError as error:
        raise ConfigError(
            f"TEASPILL_WORKSPACE_DISK=image, but the workspaces' image cannot be had: {error}. "
            "Set TEASPILL_WORKSPACE_DISK=folder (or auto) to keep workspaces in plain folders."
        ) from None
    if volumes is not None:
        closers.append(lambda: asyncio.to_thread(volumes.close))
    return volumes


def create_app(*, control: bool = True, execution: bool = True) -> ASGIApp:
    """With both planes in one process, the agent runs model steps as local journaled
    steps (no invocation of the `Model` service); the service is still served, for a
    control plane deployed elsewhere. Serves only requests restate-server signed
    (`services.stack.identity`). Refuses to build (a `ConfigError` sentence) when a
    setting, a plugin module or the model file is wrong, so a bad deployment stops at start
    instead of failing turns."""
    check(settings(), control=control, execution=execution)
    services: Services = []
    closers: list[Closer] = []
    logs.setup()
    if tracing.setup(settings().otlp_endpoint, "teaspill-endpoint"):
        closers.append(lambda: asyncio.to_thread(tracing.shutdown))
    runner = _execution(services, closers) if execution else None
    if control:
        _control(services, closers, runner)
    restate_app: ASGIApp = restate.app(services, identity_keys=accepted_keys(settings()))
    return with_shutdown(restate_app, closers)
