"""The service endpoint: the Restate ASGI app served by hypercorn in a child process."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

from services.settings import Settings
from services.stack.process import ManagedProcess, StackError, port_in_use

DEFAULT_APP = "services.app:app"


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as `TEASPILL_*` variables, so a child process reads the same values.

    Paths are made absolute (the child may run elsewhere); tuples are JSON, which is how
    pydantic-settings reads complex values from the environment.
    """
    prefix = settings.model_config.get("env_prefix", "")
    env: dict[str, str] = {}
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if value is not None:
            env[f"{prefix}{name}".upper()] = _env_value(value)
    return env


def _env_value(value: object) -> str:
    if isinstance(value, Path):
        return str(value.absolute())
    if isinstance(value, tuple | list):
        return json.dumps(list(value))
    return str(value)


class Endpoint:
    """`python -m hypercorn <app> --bind 127.0.0.1:<endpoint_port>`, logging to
    `$TEASPILL_HOME/logs/endpoint.log`."""

    def __init__(
        self,
        settings: Settings,
        app: str = DEFAULT_APP,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.app = app
        self.extra_env = dict(env or {})
        self.log_path = settings.home / "logs" / "endpoint.log"
        self._process: ManagedProcess | None = None

    @property
    def pid(self) -> int | None:
        """The process group of the running part (its leader's pid)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def argv(self) -> list[str]:
        bind = f"127.0.0.1:{self.settings.endpoint_port}"
        return [sys.executable, "-m", "hypercorn", self.app, "--bind", bind]

    def env(self) -> dict[str, str]:
        return {**os.environ, **settings_env(self.settings), **self.extra_env}

    def start(self, timeout: float = 60.0) -> None:
        """Start hypercorn and return once the app answers the SDK's `GET /health`."""
        port = self.settings.endpoint_port
        if port_in_use(port):
            raise StackError(
                f"Port {port} (the service endpoint) on 127.0.0.1 is already in use: stop what"
                " listens there or set TEASPILL_ENDPOINT_PORT to another port."
            )
        self._process = ManagedProcess("The endpoint", self.argv(), self.env(), self.log_path)
        self._process.spawn()
        try:
            self._process.wait_until(
                self._healthy, timeout, f"serve {self.app} on {self.settings.endpoint_url}"
            )
        except StackError:
            self._process.kill()
            raise

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: hypercorn finishes open requests (within its grace period) and exits."""
        if self._process is not None:
            self._process.stop(timeout)

    def kill(self) -> None:
        """SIGKILL hypercorn and its worker, as a crash would."""
        if self._process is not None:
            self._process.kill()

    def _healthy(self) -> bool:
        try:
            response = httpx.get(f"{self.settings.endpoint_url}/health", timeout=2.0)
        except httpx.TransportError:
            return False
        return response.status_code == httpx.codes.OK
