"""The composition root: the one place that knows every service.

`create_app()` serves both planes from one endpoint (the embedded default): hypercorn
builds it with `python -m hypercorn 'services.app:create_app()'`, so importing this
module builds nothing. To serve the planes apart, so that an operator can restart or
scale either alone, point two servers at `services.app:create_app(execution=False)` and
`services.app:create_app(control=False)`.
"""

from __future__ import annotations

import asyncio

import httpx
import restate

from services.agent.object import agent_object
from services.agent.observers import load_observers
from services.executor.live import http_post
from services.executor.registry import default_models
from services.executor.service import model_service
from services.lifespan import ASGIApp, Closer, with_shutdown
from services.projection.projector import Projection, projector_service
from services.settings import settings
from services.tenant.object import tenant
from services.tools.registry import load_tools
from services.workspace.effects import EffectLedger, effects_object
from services.workspace.service import workspace_service
from services.workspace.tools import WorkspaceHost

Services = list[restate.Service | restate.VirtualObject]


def _control(services: Services, closers: list[Closer]) -> None:
    config = settings()
    projection = Projection(config.home / "projection.db")
    services += [
        agent_object(
            load_tools(config.home, config.tool_modules), load_observers(config.observer_modules)
        ),
        tenant,
        projector_service(projection, config.ingress_url, config.admin_url),
    ]
    closers.append(projection.close)


def _execution(services: Services, closers: list[Closer]) -> None:
    config = settings()
    models = default_models(config, config.model_modules)
    live = None
    if config.live_token:
        client = httpx.AsyncClient()
        live = http_post(config.live_push_url, config.live_token, client)
        closers.append(client.aclose)
    services.append(model_service(models, live))
    closers.append(lambda: asyncio.to_thread(models.close))
    ledger_client = httpx.AsyncClient()
    ledger = EffectLedger(config.ingress_url, ledger_client)
    services += [workspace_service(WorkspaceHost(config.home, config.bwrap), ledger)]
    services += [effects_object()]
    closers.append(ledger_client.aclose)


def create_app(*, control: bool = True, execution: bool = True) -> ASGIApp:
    services: Services = []
    closers: list[Closer] = []
    if control:
        _control(services, closers)
    if execution:
        _execution(services, closers)
    restate_app: ASGIApp = restate.app(services)
    return with_shutdown(restate_app, closers)
