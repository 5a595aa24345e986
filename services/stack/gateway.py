"""The gateway: `services.gateway.app:app` served by hypercorn in a child process."""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

from services.settings import Settings
from services.stack.endpoint import hypercorn_argv, settings_env
from services.stack.process import Part, answers

GATEWAY_APP = "services.gateway.app:app"
ANY_ADDRESS = {"0.0.0.0", "::", ""}  # noqa: S104 - names the wildcard, binds nothing


def local_url(settings: Settings) -> str:
    """Where this machine reaches the gateway, whichever address it listens on."""
    host = settings.gateway_host
    if host in ANY_ADDRESS:
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.gateway_port}"


class Gateway(Part):
    """`python -m hypercorn services.gateway.app:app --bind <gateway_host>:<gateway_port>`,
    logging to `$TEASPILL_HOME/logs/gateway.log`."""

    name = "the gateway"

    def __init__(
        self,
        settings: Settings,
        app: str = GATEWAY_APP,
        env: Mapping[str, str] | None = None,
        *,
        log_name: str = "gateway",
    ) -> None:
        super().__init__(settings, log_name)
        self.app = app
        self.extra_env = dict(env or {})
        self.url = local_url(settings)

    def argv(self) -> list[str]:
        host, port = self.settings.gateway_host, self.settings.gateway_port
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        # No read timeout: an SSE client sends nothing while it reads, and hypercorn's would
        # cut every stream that outlives it. The keep-alive timeout bounds a request's
        # headers, and the gateway bounds its body (TEASPILL_BODY_TIMEOUT_SECONDS).
        return hypercorn_argv(self.app, bind, keep_alive=self.settings.keep_alive_seconds)

    def env(self) -> dict[str, str]:
        return {**os.environ, **settings_env(self.settings), **self.extra_env}

    def ports(self) -> dict[str, tuple[int, str]]:
        return {"the gateway": (self.settings.gateway_port, "TEASPILL_GATEWAY_PORT")}

    def ready(self) -> bool:
        """`GET /v1/health` answers: 200, or 503 while the projection or ingress is not
        there yet (the app itself is up)."""
        return answers(f"{self.url}/v1/health", httpx.codes.OK, httpx.codes.SERVICE_UNAVAILABLE)
