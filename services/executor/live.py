"""Live text on its way to the gateway while the model writes.

Nothing here is journaled: if a push fails the text is sent again, longer, with the next
one (each push starts at the last offset the gateway took), so a follower sees larger
pieces, never a gap. If the gateway is gone the text is simply not shown live; the
recorded `model_message` carries all of it.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Awaitable, Callable

import httpx
import msgspec

from schemas.live import LiveBatch, LiveDelta
from schemas.model import ModelRequest

Post = Callable[[LiveBatch], Awaitable[bool]]
INTERVAL = 0.05
TOKEN_HEADER = "x-teaspill-live-token"  # noqa: S105 - a header name, not a secret


class LiveText:
    """The text of one attempt of one round: written from the model's thread, pushed from
    the event loop."""

    def __init__(self, request: ModelRequest, post: Post) -> None:
        self._request = request
        self._post = post
        self._attempt = secrets.token_hex(8)
        self._lock = threading.Lock()
        self._text = ""
        self._acked = 0

    def write(self, piece: str) -> None:
        with self._lock:
            self._text += piece

    async def push(self) -> None:
        with self._lock:
            text = self._text
        if len(text) == self._acked:
            return
        request = self._request
        delta = LiveDelta(
            request.agent, request.turn, request.round, self._attempt, self._acked,
            text[self._acked :],
        )  # fmt: skip
        if await self._post(LiveBatch((delta,))):
            self._acked = len(text)

    async def run(self, interval: float = INTERVAL) -> None:
        """Push every `interval` until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.push()


def http_post(gateway_url: str, token: str, client: httpx.AsyncClient) -> Post:
    async def post(batch: LiveBatch) -> bool:
        try:
            response = await client.post(
                f"{gateway_url}/internal/live",
                content=msgspec.json.encode(batch),
                headers={TOKEN_HEADER: token, "content-type": "application/json"},
                timeout=1.0,
            )
        except httpx.HTTPError:
            return False
        return response.status_code < 300

    return post
