"""`teaspill status`: which parts of a deployment answer, one line each.

The planes are found where Restate finds them: the admin API lists the deployment that
serves each service, so a split deployment (a control plane and an execution plane on
their own ports, or machines) is reported as it runs, not as `teaspill up` would start it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from services.cli import home
from services.settings import Settings
from services.stack import postgres
from services.stack.cluster import Layout
from services.stack.gateway import local_url
from services.stack.process import answers

PLANES = {"Agent": "control plane", "Model": "execution plane"}
"""A service each plane must serve for turns to run."""

Line = tuple[str, str, str]
"""A part, its state, and where it was asked (or what to do)."""


def status(settings: Settings) -> int:
    layout = home.read(settings).get("cluster")
    if isinstance(layout, dict):
        lines = _cluster(settings, Layout.from_json(layout))
    else:
        lines = [*_core(settings), *_deployments(settings), _gateway(settings)]
    for name, state, where in lines:
        print(f"{name:15} {state:5} {where}")
    return 0 if all(state.startswith("up") for _, state, _ in lines) else 1


def _core(settings: Settings) -> list[Line]:
    admin = f"{settings.admin_url}/health"
    ingress = f"{settings.ingress_url}/restate/health"
    return [
        ("restate-server", _up(answers(admin)), admin),
        ("ingress", _up(answers(ingress)), ingress),
    ]


def _cluster(settings: Settings, layout: Layout) -> list[Line]:
    """The cluster layout (`teaspill up --cluster`): each node's admin API and ingress,
    the proxy's three frontends, each endpoint replica, the deployments Restate routes to
    (through the proxy), each gateway; first, the home's PostgreSQL, when the layout
    started one."""
    lines: list[Line] = []
    if layout.postgres is not None:
        lines.append(_postgres(settings, layout.postgres))
    for node in layout.nodes:
        admin, ingress = f"{node.admin_url}/health", f"{node.ingress_url}/restate/health"
        lines.append((f"restate {node.name}", _up(answers(admin)), admin))
        lines.append((f"ingress {node.name}", _up(answers(ingress)), ingress))
    for name, url in (
        ("proxy ingress", f"{settings.ingress_url}/restate/health"),
        ("proxy admin", f"{settings.admin_url}/health"),
        ("proxy endpoint", f"{settings.endpoint_url}/health"),
    ):
        lines.append((name, _up(answers(url)), url))
    for i, port in enumerate(layout.endpoints):
        url = f"http://127.0.0.1:{port}/health"
        lines.append((f"endpoint e{i + 1}", _up(answers(url)), url))
    lines += _deployments(settings)
    for i, port in enumerate(layout.gateways):
        gateway = settings.model_copy(update={"gateway_port": port})
        lines.append(_gateway(gateway, f"gateway g{i + 1}"))
    return lines


def _postgres(settings: Settings, port: int) -> Line:
    shown = postgres.url(settings, port, password=False)
    try:
        up = postgres.answers(postgres.url(settings, port))
    except OSError:  # no password file: the home's PostgreSQL was never made
        up = False
    return ("postgres", _up(up), shown)


def _gateway(settings: Settings, name: str = "gateway") -> Line:
    url = f"{local_url(settings)}/v1/health"
    if answers(url):
        return (name, "up", url)
    # The gateway answers 503 until the projection has its first event: it is up.
    if answers(url, httpx.codes.SERVICE_UNAVAILABLE):
        return (name, "up (no agent has run yet)", url)
    return (name, "down", url)


def _deployments(settings: Settings) -> Iterator[Line]:
    """One line per deployment serving a service; then a line for a plane nobody serves."""
    registered = _registered(settings)
    if registered is None:
        # Without the admin API, the endpoint `teaspill up` would start is all to ask.
        url = f"{settings.endpoint_url}/health"
        yield ("endpoint", _up(answers(url)), url)
        return
    served: set[str] = set()
    for uri, services in sorted(registered.items()):
        served.update(services)
        yield ("deployment", _up(answers(f"{uri}/health")), f"{uri} ({', '.join(services)})")
    for service, plane in PLANES.items():
        if service not in served:
            yield (
                plane,
                "down",
                f"no deployment serves {service}: start it and register it (`teaspill up` does)",
            )


def _registered(settings: Settings) -> dict[str, list[str]] | None:
    """The deployments Restate routes to, by URI, with the services each serves; None if
    the admin API does not answer."""
    try:
        with httpx.Client(base_url=settings.admin_url, timeout=5.0) as admin:
            services = admin.get("/services").raise_for_status().json()
            deployments = admin.get("/deployments").raise_for_status().json()
    except (httpx.HTTPError, ValueError):
        return None
    uris = {d["id"]: _uri(d) for d in deployments.get("deployments", [])}
    found: dict[str, list[str]] = {}
    for service in services.get("services", []):
        uri = uris.get(service.get("deployment_id"), "an unknown deployment")
        found.setdefault(uri, []).append(service["name"])
    return {uri: sorted(names) for uri, names in found.items()}


def _uri(deployment: dict[str, Any]) -> str:
    return str(deployment.get("uri") or deployment.get("arn") or deployment.get("id")).rstrip("/")


def _up(ok: bool) -> str:
    return "up" if ok else "down"
