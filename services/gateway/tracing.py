"""The gateway's request span: each HTTP request starts a trace, or continues the one its
W3C `traceparent` header names, and every ingress call it makes carries it on."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.observe import tracing

SERVER_ERROR = 500


class TracingMiddleware:
    """A server span per HTTP request, named by its route's template (`POST
    /v1/agents/{address}/messages`) once routing has found one; a pass-through when
    tracing is off."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not tracing.enabled():
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        attributes = {"http.request.method": method, "url.path": scope["path"]}
        with tracing.span(
            f"{method} {scope['path']}", tracing.extracted(headers), attributes, SpanKind.SERVER
        ) as made:
            status: dict[str, int] = {}

            async def sent(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                await send(message)

            try:
                await self.app(scope, receive, sent)
            finally:
                _close(made, scope, status.get("code"))


def _close(made: Any, scope: Scope, code: int | None) -> None:
    if made is None:
        return
    route = getattr(scope.get("route"), "path", None)
    if route:
        made.update_name(f"{scope['method']} {route}")
        made.set_attribute("http.route", route)
    if code is not None:
        made.set_attribute("http.response.status_code", code)
        if code >= SERVER_ERROR:
            made.set_status(Status(StatusCode.ERROR))
