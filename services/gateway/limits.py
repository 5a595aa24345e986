"""The request body limit (`TEASPILL_MAX_BODY_BYTES`): 413 before the body is parsed.

A declared `Content-Length` over the limit is refused without reading; a body sent in
chunks is counted as it arrives and refused once it passes the limit. A body within the
limit is handed on whole.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.errors import ApiError, send_error


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit} bytes, the most accepted")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and not declared.isdigit():
            await send_error(send, ApiError(400, "Content-Length must be a number of bytes"))
            return
        if declared is not None and int(declared) > self.limit:
            await send_error(send, too_large(self.limit))
            return
        body = await self._read(receive)
        if body is None:
            await send_error(send, too_large(self.limit))
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
