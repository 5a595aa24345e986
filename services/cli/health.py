"""`teaspill status`: which parts of a deployment answer, one line each.

The planes are found where Restate finds them: the admin API lists the deployment that
serves each service, so a split deployment (a control plane and an execution plane on
their own ports, or machines) is reported as it runs, not as `teaspill up` would start it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from services.settings import Settings
from services.stack.gateway import local_url
from services.stack.process import answers

PLANES = {"Agent": "control plane", "Model": "execution plane"}
"""A service each plane must serve for turns to run."""

Line = tuple[str, str, str]
"""A part, its state, and where it was asked (or what to do)."""


def status(settings: Settings) -> int:
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


def _gateway(settings: Settings) -> Line:
    url = f"{local_url(settings)}/v1/health"
    if answers(url):
        return ("gateway", "up", url)
    # The gateway answers 503 until the projection has its first event: it is up.
    if answers(url, httpx.codes.SERVICE_UNAVAILABLE):
        return ("gateway", "up (no agent has run yet)", url)
    return ("gateway", "down", url)


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
