"""Live text on its way to the gateways while the model writes.

Nothing here is journaled. Each gateway is pushed to on its own and from its own offset:
the last one it took, as it said in its answer (the length of the round's text it holds).
If a push fails the text is sent again, longer, with the next one, so a follower sees
larger pieces, never a gap; a gateway that holds less than it was sent from (it started
again and lost what it had) says so, and gets the whole text with the next push. If a
gateway is gone the text is simply not shown live there; the recorded `model_message`
carries all of it.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Awaitable, Callable, Sequence

import httpx
import msgspec

from schemas.live import LiveBatch, LiveDelta
from schemas.model import ModelRequest

Post = Callable[[LiveBatch], Awaitable[int | None]]
"""Push one delta to one gateway: the length of the round's text it now holds, or None
when it did not answer."""
INTERVAL = 0.05
TOKEN_HEADER = "x-teaspill-live-token"  # noqa: S105 - a header name, not a secret


class LiveText:
    """The text of one attempt of one round: written from the model's thread, pushed from
    the event loop."""

    def __init__(self, request: ModelRequest, posts: Sequence[Post]) -> None:
        self._request = request
        self._posts = tuple(posts)
        self._attempt = secrets.token_hex(8)
        self._lock = threading.Lock()
        self._text = ""
        self._acked = [0] * len(self._posts)

    def write(self, piece: str) -> None:
        with self._lock:
            self._text += piece

    async def push(self) -> None:
        """What each gateway has not taken yet, to every gateway at once."""
        await asyncio.gather(*(self._push_to(i) for i in range(len(self._posts))))

    async def run(self, interval: float = INTERVAL) -> None:
        """Push to each gateway every `interval` until cancelled, each on its own: a
        gateway that is slow to answer holds up no other."""
        await asyncio.gather(*(self._every(i, interval) for i in range(len(self._posts))))

    async def _every(self, gateway: int, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self._push_to(gateway)

    async def _push_to(self, gateway: int) -> None:
        with self._lock:
            text = self._text
        request, acked = self._request, self._acked[gateway]
        if acked >= len(text):
            return
        delta = LiveDelta(
            request.agent, request.turn, request.round, self._attempt, acked, text[acked:]
        )
        held = await self._posts[gateway](LiveBatch((delta,)))
        if held is not None:
            self._acked[gateway] = min(held, len(text))


class _Taken(msgspec.Struct):
    held: tuple[int, ...] = ()


def http_post(gateway_url: str, token: str, client: httpx.AsyncClient) -> Post:
    """Push to the gateway at `gateway_url`; a gateway that answers without `held` (an
    older one) is taken to hold all it was sent."""

    async def post(batch: LiveBatch) -> int | None:
        try:
            response = await client.post(
                f"{gateway_url}/internal/live",
                content=msgspec.json.encode(batch),
                headers={TOKEN_HEADER: token, "content-type": "application/json"},
                timeout=1.0,
            )
        except httpx.HTTPError:
            return None
        if response.status_code >= 300:
            return None
        last = batch.deltas[-1]
        try:
            held = msgspec.json.decode(response.content, type=_Taken).held
        except msgspec.DecodeError:
            held = ()
        return held[-1] if held else last.offset + len(last.text)

    return post
