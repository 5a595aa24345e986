"""The service endpoint: the Restate ASGI app served by hypercorn in a child process."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from services.settings import Settings
from services.stack.process import Part, answers
from services.workspace.volumes import release

DEFAULT_APP = "services.app:create_app()"


def hypercorn_argv(
    app: str, bind: str, *, keep_alive: int, read_timeout: int | None = None
) -> list[str]:
    """`python -m hypercorn <app> --bind <bind>` on uvloop's event loop. The endpoint's
    event loop is what a crowd of agents runs out of first, and `python -m bench
    concurrent` shows uvloop's gain there: about half the endpoint's CPU a round with 50
    agents, and over 1.5 times the rounds/s of asyncio's own loop.

    `keep_alive`: seconds an idle connection is kept, which also bounds how long a request's
    headers may take to arrive (hypercorn counts a connection idle until they have);
    `read_timeout`: seconds a connection may send nothing before it is closed."""
    argv = [sys.executable, "-m", "hypercorn", app, "--bind", bind, "--worker-class", "uvloop"]
    argv += ["--keep-alive", str(keep_alive)]
    if read_timeout is not None:
        argv += ["--read-timeout", str(read_timeout)]
    return argv


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as `TEASPILL_*` variables, so a child process reads the same values.

    Paths are made absolute (the child may run elsewhere); tuples are JSON lists.
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


class Endpoint(Part):
    """`hypercorn_argv` of the app, bound to 127.0.0.1:<endpoint_port>, logging to
    `$TEASPILL_HOME/logs/endpoint.log`."""

    name = "the endpoint"

    def __init__(
        self,
        settings: Settings,
        app: str = DEFAULT_APP,
        env: Mapping[str, str] | None = None,
        *,
        log_name: str = "endpoint",
    ) -> None:
        super().__init__(settings, log_name)
        self.app = app
        self.extra_env = dict(env or {})

    def argv(self) -> list[str]:
        s = self.settings
        return hypercorn_argv(
            self.app,
            f"127.0.0.1:{s.endpoint_port}",
            keep_alive=s.keep_alive_seconds,
            read_timeout=s.endpoint_read_timeout_seconds,
        )

    def env(self) -> dict[str, str]:
        return {**os.environ, **settings_env(self.settings), **self.extra_env}

    def ports(self) -> dict[str, tuple[int, str]]:
        return {"the service endpoint": (self.settings.endpoint_port, "TEASPILL_ENDPOINT_PORT")}

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM and wait; then the workspaces' filesystem the endpoint mounted is
        unmounted, unless another process of the home still holds it. A kill leaves it
        mounted, and the next start takes it up again."""
        try:
            super().stop(timeout)
        finally:
            release(self.settings.home)

    def ready(self) -> bool:
        """The SDK's `GET /health` answers."""
        return answers(f"{self.settings.endpoint_url}/health")
