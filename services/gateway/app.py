"""The gateway: the public HTTP API, an ASGI app served by hypercorn.

    python -m hypercorn services.gateway.app:app --bind 127.0.0.1:8000

It reads the projection and reaches agents and tenants only through Restate ingress.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.routing import Route

from services.gateway import a2a_server, errors
from services.gateway.auth import AuthMiddleware
from services.gateway.console import router as console
from services.gateway.feeds import Hub
from services.gateway.hooks import SigningKey, key_file
from services.gateway.keycache import KeyCache
from services.gateway.limits import BodyLimitMiddleware
from services.gateway.listening import listening
from services.gateway.mcp_server import Mcp
from services.gateway.openapi import component_schemas
from services.gateway.quotas import Quotas
from services.gateway.rates import DailyCap, RateLimiter, StreamSlots
from services.gateway.reader import ProjectionReader
from services.gateway.routes_agents import router as agents
from services.gateway.routes_agui import router as agui
from services.gateway.routes_artifacts import router as artifacts
from services.gateway.routes_control import router as control
from services.gateway.routes_deployment import router as deployment
from services.gateway.routes_endusers import VISITOR_SECRET, visitors_past
from services.gateway.routes_endusers import router as end_users
from services.gateway.routes_hooks import router as hooks
from services.gateway.routes_keys import router as keys
from services.gateway.routes_knowledge import router as knowledge
from services.gateway.routes_lifecycle import router as lifecycle
from services.gateway.routes_memory import router as memory
from services.gateway.routes_ops import router as operations
from services.gateway.routes_pages import router as page_calls
from services.gateway.routes_schedules import router as schedules
from services.gateway.routes_specs import router as specs
from services.gateway.routes_timeline import router as timelines
from services.gateway.runtime import Runtime
from services.gateway.stored import StoredState
from services.gateway.tracing import TracingMiddleware
from services.gateway.upstream import Upstream
from services.observe import logs, tracing
from services.settings import Settings, settings

DESCRIPTION = """Send messages to durable agents, read and follow their timelines, publish
specs. Every `/v1/` route but `/v1/health` needs `Authorization: Bearer <key>`. Errors
are `{"error": {"status": n, "message": "..."}}`."""


class GatewayApp(FastAPI):
    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            schema = super().openapi()
            schema.setdefault("components", {}).setdefault("schemas", {}).update(
                component_schemas()
            )
        return super().openapi()


def create_app(
    config: Settings | None = None,
    *,
    ingress_transport: httpx.AsyncBaseTransport | None = None,
    heartbeat: float = 15.0,
    poll_interval: float | None = None,
    queue_limit: int = 10_000,
) -> FastAPI:
    """The app for `config` (default: the environment's settings). `ingress_transport`
    replaces the network to Restate, its ingress and its admin API (tests); `heartbeat`:
    seconds between SSE keepalives; `poll_interval`: seconds between projection reads of a
    followed agent besides the projector's notices (default: `TEASPILL_FEED_POLL_SECONDS`,
    else `NOTIFIED_POLL` when a notify or live token or a PostgreSQL projection, which
    notifies, is set, else `UNNOTIFIED_POLL`);
    `queue_limit`: items a follower may fall behind before it catches up from the
    projection instead."""
    config = config or settings()
    path = config.home / "projection.db"
    projection = ProjectionReader(path, config.read_connections, config.projection_url)
    ingress = Upstream(config.ingress_url, ingress_transport)
    records = StoredState(config.admin_url, ingress_transport)
    rt = Runtime(
        settings=config,
        projection=projection,
        ingress=ingress,
        hub=Hub(
            projection,
            interval=_poll(config, poll_interval),
            queue_limit=queue_limit,
            page_bytes=config.page_max_bytes,
        ),
        heartbeat=heartbeat,
        keys=KeyCache(
            ProjectionReader(path, url=config.projection_url), records, config.key_cache_seconds
        ),
        streams=StreamSlots(config.key_streams),
        quotas=Quotas(projection, config.tenant_agents, config.tenant_daily_tokens),
        hook_key=SigningKey(key_file(config)),
        hook_rates=RateLimiter(config.hook_rate, config.hook_burst, what="Hook"),
        visitor_tokens=RateLimiter(
            config.visitor_rate,
            config.visitor_burst,
            what="publishable key",
            requests="requests for visitor tokens",
        ),
        visitor_conversations=DailyCap(config.visitor_conversations, visitors_past),
    )

    mcp = Mcp(rt)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with mcp.running(), listening(config.projection_url, rt.hub.projected):
                yield
        finally:
            await rt.close()
            await asyncio.to_thread(tracing.shutdown)

    # No Swagger UI or ReDoc: FastAPI's pages load their scripts from another host, and
    # nothing the gateway serves may. /openapi.json is served for any viewer.
    app = GatewayApp(
        title="teaspill gateway",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.runtime = rt
    errors.install(app)
    routers = (
        agents,
        schedules,
        hooks,
        control,
        page_calls,
        timelines,
        artifacts,
        specs,
        deployment,
        keys,
        end_users,
        lifecycle,
        memory,
        knowledge,
        agui,
        operations,
        console,
    )
    for router in routers:
        app.include_router(router)
    app.router.routes.append(Route("/mcp", mcp))
    app.router.routes.extend(a2a_server.routes(rt))
    logs.setup()
    if tracing.setup(config.otlp_endpoint, "teaspill-gateway"):
        # Innermost: it sees the scope the router marks with the route, and a request
        # refused for its key makes no trace.
        app.add_middleware(TracingMiddleware)
    app.add_middleware(
        BodyLimitMiddleware, limit=config.max_body_bytes, timeout=config.body_timeout_seconds
    )
    app.add_middleware(
        AuthMiddleware,
        keys=rt.keys,
        rates=RateLimiter(config.key_rate, config.key_burst),
        visitors=lambda: rt.hook_key.secret_for(VISITOR_SECRET),
    )
    return app


NOTIFIED_POLL = 1.0
"""Seconds between reads of a followed agent when the projector tells this gateway of new
events: the fallback for a lost notice, and for a projector that does not know this
gateway (a notice arrives within milliseconds of the commit)."""
UNNOTIFIED_POLL = 0.05


def _poll(config: Settings, interval: float | None) -> float:
    if interval is not None:
        return interval
    if config.feed_poll_seconds is not None:
        return config.feed_poll_seconds
    told = config.notify_secret or config.projection_url
    return NOTIFIED_POLL if told else UNNOTIFIED_POLL


app = create_app()
