"""The composition root: the one place that knows every service.

`app` serves both planes from one endpoint (the embedded default). To serve them apart,
so that an operator can restart or scale either alone, point two servers at
`services.app:create_app(execution=False)` and `services.app:create_app(control=False)`.
"""

from __future__ import annotations

import restate
from restate.server_types import RestateAppT

from services.agent.object import agent_object
from services.executor.registry import default_models
from services.executor.service import model_service
from services.settings import settings
from services.tools.registry import load_tools


def _control() -> restate.VirtualObject:
    config = settings()
    return agent_object(load_tools(config.home, config.tool_modules))


def _execution() -> restate.Service:
    config = settings()
    return model_service(default_models(config, config.model_modules))


def create_app(*, control: bool = True, execution: bool = True) -> RestateAppT:
    services: list[restate.Service | restate.VirtualObject] = []
    if control:
        services.append(_control())
    if execution:
        services.append(_execution())
    app: RestateAppT = restate.app(services)
    return app


app = create_app()
