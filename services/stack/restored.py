"""The first start of a restored home: Restate's deployments re-pointed, the projection
rebuilt.

A restore (`services.lifecycle.restore`) leaves `restored.json` in the home, naming the
endpoint addresses the backed-up installation registered. Invocations in flight are bound
to their deployment, so a home brought back on other ports or another machine must point
those deployments at this stack's endpoint before anything can go on; then the projection
is rebuilt from what Restate holds, and the file is removed.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from services.contracts import REBUILD, REBUILD_KEY, Empty
from services.ingress import Ingress
from services.settings import Settings
from services.stack.process import StackError

RESTORED = "restored.json"


def restored(settings: Settings) -> list[str] | None:
    """The endpoint addresses a restored home's deployments had, if it was just restored."""
    try:
        found: Any = json.loads((settings.home / RESTORED).read_text())
    except (OSError, ValueError):
        return None
    uris = found.get("endpoint_uris", []) if isinstance(found, dict) else []
    return [str(uri) for uri in uris]


def repoint(settings: Settings, old: list[str]) -> int:
    """Point every deployment registered at one of `old` at this stack's endpoint (Restate
    discovers it there again); how many were."""
    moved = 0
    with httpx.Client(base_url=settings.admin_url, timeout=30) as admin:
        listed = admin.get("/deployments")
        listed.raise_for_status()
        for deployment in listed.json().get("deployments", []):
            uri = deployment.get("uri")
            if uri in old and uri != settings.endpoint_url:
                answer = admin.patch(
                    f"/deployments/{deployment['id']}", json={"uri": settings.endpoint_url}
                )
                if answer.is_error:
                    raise StackError(
                        f"Restate could not point the restored deployment {deployment['id']} "
                        f"at {settings.endpoint_url}: {answer.text}"
                    )
                moved += 1
    return moved


def rebuild_projection(settings: Settings) -> None:
    """The projection made from what Restate holds, then the restore is done."""
    ingress = Ingress(settings.ingress_url)
    try:
        ingress.call(REBUILD, Empty(), REBUILD_KEY)
    finally:
        ingress.close()
    (settings.home / RESTORED).unlink(missing_ok=True)
