"""An ASGI lifespan for the Restate app, which has none of its own: on shutdown, close
what the process holds open (database connections, model threads), so SIGTERM ends it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Closer = Callable[[], Awaitable[None]]


def with_shutdown(app: ASGIApp, closers: list[Closer]) -> ASGIApp:
    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for close in closers:
                    await close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    return serve
