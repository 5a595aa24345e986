"""An httpx transport that streams an ASGI app's response as it is sent.

`httpx.ASGITransport` collects the whole body before it answers, which an endless SSE
stream never lets it do. This one hands the body over chunk by chunk; closing the
response tells the app the client went away (`http.disconnect`), as a browser would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Send


class StreamingTransport(httpx.AsyncBaseTransport):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        started: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        gone = asyncio.Event()
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.set_result(message)
            elif message["type"] == "http.response.body":
                chunks.put_nowait(message.get("body", b""))
                if not message.get("more_body", False):
                    chunks.put_nowait(None)

        task = asyncio.create_task(_run(self.app, _scope(request), receive, send))
        first: set[asyncio.Future[Any]] = {started, task}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            task.result()
            raise AssertionError("the app ended without answering")
        start = started.result()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start["headers"]]
        stream = _Body(chunks, gone, task)
        return httpx.Response(start["status"], headers=headers, stream=stream)


class _Body(httpx.AsyncByteStream):
    def __init__(
        self, chunks: asyncio.Queue[bytes | None], gone: asyncio.Event, task: asyncio.Task[None]
    ) -> None:
        self._chunks = chunks
        self._gone = gone
        self._task = task

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self._chunks.get()) is not None:
            yield chunk

    async def aclose(self) -> None:
        self._gone.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), 5.0)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _run(app: ASGIApp, scope: dict[str, Any], receive: Receive, send: Send) -> None:
    await app(scope, receive, send)


def _scope(request: httpx.Request) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.url.scheme,
        "path": request.url.path,
        "raw_path": request.url.raw_path.split(b"?")[0],
        "query_string": request.url.query,
        "headers": [(k.lower(), v) for k, v in request.headers.raw],
        "server": (request.url.host, request.url.port or 80),
        "client": ("127.0.0.1", 50000),
        "root_path": "",
    }


@dataclass(frozen=True)
class Frame:
    """One SSE event: `event` is '' for a comment (a keepalive)."""

    event: str
    data: str = ""
    id: str | None = None


def parse_frames(text: str) -> tuple[list[Frame], str]:
    """Complete frames in `text`, and what is left of an incomplete one."""
    frames = []
    *blocks, rest = text.split("\n\n")
    for block in blocks:
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if "event" in fields or "data" in fields:
            frames.append(
                Frame(fields.get("event", "message"), fields.get("data", ""), fields.get("id"))
            )
        else:
            frames.append(Frame(""))
    return frames, rest


class SseReader:
    """Reads an open SSE response in steps; each step returns the frames it read."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.aiter_text()
        self._buffer = ""

    async def until(
        self, done: Callable[[list[Frame]], bool], seconds: float = 10.0
    ) -> list[Frame]:
        frames: list[Frame] = []

        async def read() -> None:
            async for text in self._chunks:
                new, self._buffer = parse_frames(self._buffer + text)
                frames.extend(new)
                if done(frames):
                    return
            raise AssertionError(f"the stream ended early after {frames}")

        await asyncio.wait_for(read(), seconds)
        return frames


async def read_frames(
    response: httpx.Response, done: Callable[[list[Frame]], bool], seconds: float = 10.0
) -> list[Frame]:
    """Frames of an open SSE response until `done(frames)` holds (or time runs out)."""
    return await SseReader(response).until(done, seconds)
