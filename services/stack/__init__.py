"""Starts and stops the local stack: restate-server, the service endpoint, registration,
and the gateway.

Used by `teaspill up`, the benchmarks and every test tier that needs a real stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from services.settings import Settings
from services.stack.endpoint import DEFAULT_APP, Endpoint, settings_env
from services.stack.gateway import Gateway
from services.stack.process import StackError, free_port
from services.stack.restate import RestateServer, find_restate_server, register
from services.stack.restored import rebuild_projection, repoint, restored

__all__ = [
    "Endpoint",
    "Gateway",
    "RestateServer",
    "Stack",
    "StackError",
    "find_restate_server",
    "free_port",
    "isolated_settings",
    "register",
    "settings_env",
]


def isolated_settings(home: Path, **overrides: Any) -> Settings:
    """Settings for a stack of its own: `home`, free ports for every part, so that it
    meets no other stack on the machine, and the scripted model on (tests, benchmarks)."""
    ports = {
        f"{part}_port": free_port() for part in ("ingress", "admin", "node", "endpoint", "gateway")
    }
    return Settings(home=home, **{**ports, "scripted_model": True, **overrides})


class Stack:
    """restate-server, the endpoint, registration, then the gateway (unless `gateway` is
    False); `down` undoes it in reverse.

    `env` is added to every part's environment, `endpoint_env` to the endpoint's alone.
    As a context manager it is always taken down, even when the body raises.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        app: str = DEFAULT_APP,
        env: Mapping[str, str] | None = None,
        endpoint_env: Mapping[str, str] | None = None,
        gateway: bool = True,
    ) -> None:
        self.settings = settings
        self.restate = RestateServer(settings)
        self.endpoint = Endpoint(settings, app, {**(env or {}), **(endpoint_env or {})})
        self.gateway = Gateway(settings, env=env)
        self.serves_gateway = gateway
        self.deployment: dict[str, Any] = {}

    def up(self, progress: Callable[[str], None] = lambda _: None) -> Stack:
        """Start every part in order; `progress` hears a sentence before each step."""
        s = self.settings
        try:
            progress(f"Starting restate-server (ingress {s.ingress_url}, admin {s.admin_url})")
            self.restate.start()
            progress(f"Starting the service endpoint on {s.endpoint_url}")
            self.endpoint.start()
            if (moved := restored(s)) is not None:
                progress("Pointing the restored deployments at this endpoint")
                repoint(s, moved)
            progress("Registering the endpoint with Restate")
            self.deployment = register(s)
            if moved is not None:
                progress("Rebuilding the projection from the restored installation")
                rebuild_projection(s)
            if self.serves_gateway:
                progress(f"Starting the gateway on {self.gateway.url}")
                self.gateway.start()
        except BaseException:
            # The first failure is the one to report; stopping the rest is best effort.
            with contextlib.suppress(StackError):
                self.down()
            raise
        return self

    def down(self) -> None:
        """Stop the gateway, Restate, then the endpoint: with Restate gone the endpoint's
        invocation streams close and it exits at once. Each part is stopped even if the
        one before fails to."""
        try:
            if self.serves_gateway:
                self.gateway.stop()
        finally:
            try:
                self.restate.stop()
            finally:
                self.endpoint.stop()

    def __enter__(self) -> Stack:
        return self.up()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()
