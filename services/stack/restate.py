"""The coordination core: a real `restate-server` process, and registering endpoints with it."""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from services.settings import Settings
from services.stack.process import Part, StackError, answers

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "restate.toml"
BINARY_ENV = "TEASPILL_RESTATE_SERVER"
INSTALL_HINT = f"run `make install` (or `npm ci` in {REPO})"

_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def find_restate_server() -> Path:
    """The restate-server binary: $TEASPILL_RESTATE_SERVER, else the one npm installed.

    The native binary is preferred over the `.bin` wrapper, a node script that forwards
    SIGTERM but would leave the server running if only the wrapper were killed.
    """
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        if not _executable(path):
            raise StackError(f"{BINARY_ENV}={override} is not an executable file.")
        return path
    for candidate in _installed_candidates():
        if _executable(candidate):
            return candidate
    raise StackError(
        f"restate-server is not installed: {INSTALL_HINT}, or set {BINARY_ENV} to its path."
    )


def _installed_candidates() -> list[Path]:
    modules = REPO / "node_modules"
    arch = _ARCH.get(platform.machine().lower(), platform.machine().lower())
    native = modules / "@restatedev" / f"restate-server-{sys.platform}-{arch}" / "bin"
    return [native / "restate-server", modules / ".bin" / "restate-server"]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def restate_env(settings: Settings) -> dict[str, str]:
    """Per-run overrides of restate.toml (environment variables win over the file); the
    request identity key is made in the home when it is missing."""
    # Imported here, so that `python -m services.stack.identity` runs a module the package
    # has not imported already.
    from services.stack.identity import private_key_file  # noqa: PLC0415

    tracing = (
        {"RESTATE_TRACING_ENDPOINT": settings.restate_tracing_endpoint}
        if settings.restate_tracing_endpoint
        else {}
    )
    return {
        **tracing,
        "RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE": str(
            private_key_file(settings.home)
        ),
        "RESTATE_BASE_DIR": str((settings.home / "restate").absolute()),
        "RESTATE_BIND_PORT": str(settings.node_port),
        "RESTATE_INGRESS__BIND_PORT": str(settings.ingress_port),
        "RESTATE_ADMIN__BIND_PORT": str(settings.admin_port),
        "RESTATE_DEFAULT_JOURNAL_RETENTION": f"{settings.journal_retention_seconds}s",
    }


class RestateServer(Part):
    """`restate-server --config-file restate.toml`, with its data in `$TEASPILL_HOME/restate`."""

    name = "restate-server"
    stop_timeout = 60.0

    def __init__(self, settings: Settings, *, config: Path = CONFIG) -> None:
        super().__init__(settings, "restate")
        self.config = config
        self.base_dir = settings.home / "restate"

    def argv(self) -> list[str]:
        if not self.config.is_file():
            raise StackError(f"The Restate config {self.config} is missing.")
        return [str(find_restate_server()), "--config-file", str(self.config), "--no-logo"]

    def env(self) -> dict[str, str]:
        return {**os.environ, **restate_env(self.settings)}

    def ports(self) -> dict[str, tuple[int, str]]:
        s = self.settings
        return {
            "Restate ingress": (s.ingress_port, "TEASPILL_INGRESS_PORT"),
            "Restate admin": (s.admin_port, "TEASPILL_ADMIN_PORT"),
            "Restate node": (s.node_port, "TEASPILL_NODE_PORT"),
        }

    def ready(self) -> bool:
        """The admin API answers `GET /health`."""
        return answers(f"{self.settings.admin_url}/health")


def register(
    settings: Settings,
    *,
    uri: str | None = None,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """Register (or re-register, with force) the endpoint with Restate's admin API.

    Retries while the admin API or the endpoint is still coming up (no answer, or a 5xx);
    a 4xx is final. Returns Restate's answer: the deployment id and its services.
    """
    body = {"uri": uri or settings.endpoint_url, "force": True}
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=settings.admin_url, transport=transport, timeout=10.0) as client:
        while True:
            answer = _post_deployment(client, body)
            if isinstance(answer, dict):
                return answer
            failure, final = answer
            if final or time.monotonic() >= deadline:
                raise StackError(f"Restate could not register {body['uri']}: {failure}")
            time.sleep(0.25)


def _post_deployment(
    client: httpx.Client, body: dict[str, object]
) -> dict[str, Any] | tuple[str, bool]:
    """Restate's answer, or what went wrong and whether retrying is pointless."""
    try:
        response = client.post("/deployments", json=body)
    except httpx.TransportError as error:
        return f"the admin API at {client.base_url} did not answer ({error!r}).", False
    if response.is_success:
        answer: dict[str, Any] = response.json()
        return answer
    failure = f"the admin API answered {response.status_code}: {response.text.strip()}"
    return failure, response.is_client_error
