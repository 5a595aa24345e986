"""The gateway: `services.gateway.app:app` served by hypercorn in a child process."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import httpx

from services.settings import Settings
from services.stack.endpoint import settings_env
from services.stack.process import ManagedProcess, StackError, port_in_use

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


class Gateway:
    """`python -m hypercorn services.gateway.app:app --bind <gateway_host>:<gateway_port>`,
    logging to `$TEASPILL_HOME/logs/gateway.log`."""

    def __init__(
        self, settings: Settings, app: str = GATEWAY_APP, env: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.app = app
        self.extra_env = dict(env or {})
        self.log_path = settings.home / "logs" / "gateway.log"
        self.url = local_url(settings)
        self._process: ManagedProcess | None = None

    @property
    def pid(self) -> int | None:
        """The process group of the running part (its leader's pid)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def argv(self) -> list[str]:
        host = self.settings.gateway_host
        bind = (
            f"[{host}]:{self.settings.gateway_port}"
            if ":" in host
            else (f"{host}:{self.settings.gateway_port}")
        )
        return [sys.executable, "-m", "hypercorn", self.app, "--bind", bind]

    def env(self) -> dict[str, str]:
        return {**os.environ, **settings_env(self.settings), **self.extra_env}

    def start(self, timeout: float = 60.0) -> None:
        """Start hypercorn and return once the app answers `GET /v1/health` (200, or 503
        while the projection or ingress is not there yet: the app itself is up)."""
        port = self.settings.gateway_port
        if port_in_use(port):
            raise StackError(
                f"Port {port} (the gateway) on 127.0.0.1 is already in use: stop what listens"
                " there or set TEASPILL_GATEWAY_PORT to another port."
            )
        self._process = ManagedProcess("The gateway", self.argv(), self.env(), self.log_path)
        self._process.spawn()
        try:
            self._process.wait_until(self._serving, timeout, f"serve the API on {self.url}")
        except StackError:
            self._process.kill()
            raise

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: hypercorn ends open streams (within its grace period) and exits."""
        if self._process is not None:
            self._process.stop(timeout)

    def kill(self) -> None:
        """SIGKILL hypercorn and its worker, as a crash would."""
        if self._process is not None:
            self._process.kill()

    def _serving(self) -> bool:
        try:
            response = httpx.get(f"{self.url}/v1/health", timeout=2.0)
        except httpx.TransportError:
            return False
        return response.status_code in (httpx.codes.OK, httpx.codes.SERVICE_UNAVAILABLE)
