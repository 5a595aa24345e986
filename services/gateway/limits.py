"""The request body limits: 413 before the body is parsed (`TEASPILL_MAX_BODY_BYTES`), 408
when it does not arrive in time (`TEASPILL_BODY_TIMEOUT_SECONDS`).

A declared `Content-Length` over the limit is refused without reading; a body sent in
chunks is counted as it arrives and refused once it passes the limit. A body within the
limit is handed on whole. The whole body must arrive within the timeout, so a client
that trickles its body holds a connection for that long at most (hypercorn's keep-alive
timeout bounds how long the headers may take).
"""

from __future__ import annotations

import asyncio

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.errors import ApiError, send_error


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit} bytes, the most accepted")


def too_slow(timeout: float) -> ApiError:
    return ApiError(408, f"the request body did not arrive within {timeout:g} s")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: int, timeout: float = 30.0) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and not declared.isdigit():
            error = ApiError(400, "Content-Length must be a number of bytes")
            await send_error(send, error, unread_body=True)
            return
        if declared is not None and int(declared) > self.limit:
            await send_error(send, too_large(self.limit), unread_body=True)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.timeout)
        except TimeoutError:
            await send_error(send, too_slow(self.timeout), unread_body=True)
            return
        if body is None:
            await send_error(send, too_large(self.limit), unread_body=True)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None once it passes the limit (or the client went away)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
