"""Starts and stops the local stack: restate-server, the service endpoint, registration,
and the gateway.

Used by `teaspill up` and by the durable test fixtures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from services.settings import Settings
from services.stack.endpoint import DEFAULT_APP, Endpoint, settings_env
from services.stack.gateway import Gateway
from services.stack.process import StackError, free_port
from services.stack.restate import RestateServer, find_restate_server, register

__all__ = [
    "Endpoint",
    "Gateway",
    "RestateServer",
    "Stack",
    "StackError",
    "find_restate_server",
    "free_port",
    "register",
    "settings_env",
]


class Stack:
    """restate-server, the endpoint, registration, then the gateway; `down` undoes it in
    reverse.

    As a context manager it is always taken down, even when the body raises.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        app: str = DEFAULT_APP,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.restate = RestateServer(settings)
        self.endpoint = Endpoint(settings, app, env)
        self.gateway = Gateway(settings, env=env)
        self.deployment: dict[str, Any] = {}

    def up(self) -> Stack:
        try:
            self.restate.start()
            self.endpoint.start()
            self.deployment = register(self.settings)
            self.gateway.start()
        except BaseException:
            # The first failure is the one to report; stopping the rest is best effort.
            with contextlib.suppress(StackError):
                self.down()
            raise
        return self

    def down(self) -> None:
        """Stop the gateway, the endpoint, then Restate; each is stopped even if the one
        before fails to."""
        try:
            self.gateway.stop()
        finally:
            try:
                self.endpoint.stop()
            finally:
                self.restate.stop()

    def __enter__(self) -> Stack:
        return self.up()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()
