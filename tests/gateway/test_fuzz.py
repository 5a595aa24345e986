"""Generated input against the OpenAPI description: no route answers 5xx.

schemathesis derives requests from /openapi.json (valid and invalid ones) and sends them
in-process with an admin key; the `not_a_server_error` check fails on any 5xx.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.python.asgi import shutdown_lifespans

from services.gateway.app import create_app
from services.projection.store import ProjectionStore
from services.settings import Settings
from tests.gateway.conftest import LIVE_TOKEN, FakeIngress, seed, settings_for


async def _seeded(home: Path) -> dict[str, str]:
    async with await ProjectionStore.open(home / "projection.db") as store:
        return await seed(store)


@dataclass(frozen=True)
class Target:
    app: FastAPI
    keys: dict[str, str]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A gateway on a seeded projection, for the whole module; its lifespan runs in
    schemathesis' event loop thread and is shut down at the end."""
    home = tmp_path_factory.mktemp("fuzz")
    keys = asyncio.run(_seeded(home))
    app = create_app(
        settings_for(home),
        ingress_transport=httpx.MockTransport(FakeIngress()),
        heartbeat=0.05,
        poll_interval=0.02,
    )
    yield Target(app, keys)
    shutdown_lifespans()


# The description does not depend on settings: any app's will do for generating cases.
schema = schemathesis.openapi.from_dict(create_app(Settings()).openapi())


@schemathesis.serializer("application/pdf")
def _pdf(ctx: Any, value: object) -> bytes:
    """A PDF upload's body as the bytes drawn (any bytes: the route must refuse junk)."""
    return value if isinstance(value, bytes) else str(value).encode()


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_route_answers_5xx(case: schemathesis.Case[Any], target: Target) -> None:
    headers = {
        "Authorization": f"Bearer {target.keys['admin']}",
        "X-Teaspill-Live-Token": LIVE_TOKEN,
    }
    # An SSE stream never ends by itself: the read timeout cuts it, keeping what came. Any
    # other answer must come within it: two seconds, as half a second failed a prompt 422
    # as a timeout once on a busy machine.
    case.call_and_validate(
        app=target.app, headers=headers, checks=[not_a_server_error], timeout=2.0
    )
