"""A model on any server that speaks the chat-completions API, streamed.

Calls run on the event loop, concurrently (the server queues them itself). When the
Restate attempt ends, the streaming task is cancelled, which closes the HTTP stream: the
server sees the client go away and stops generating.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec

from schemas.chat import ChatMessage
from schemas.model import ModelReply, ModelRequest
from services.executor.chat_api import (
    ModelError,
    StreamedReply,
    error_message,
    request_body,
    sse_data,
)
from services.executor.config import RemoteModel, api_key
from services.executor.errors import public, public_url
from services.executor.protocol import TextSink, discard
from services.executor.timing import Stopwatch

Cancelled = Callable[[], Awaitable[object]]


class RemoteExecutor:
    """One named model on an OpenAI-compatible server."""

    def __init__(self, name: str, config: RemoteModel, client: httpx.AsyncClient) -> None:
        self.name = name
        self._config = config
        self._client = client
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._where = public_url(config.base_url)
        """Where the server is, as errors may say it: no credentials, no query."""

    async def generate(
        self,
        request: ModelRequest,
        cancelled: Cancelled | None = None,
        on_text: TextSink = discard,
    ) -> ModelReply:
        """The reply; `ModelError` when the server fails, a cancelled reply (with the text
        so far) when `cancelled` completes first."""
        key = api_key(self.name, self._config)
        reply = StreamedReply(self.name)
        stream = asyncio.ensure_future(self._stream(request, key, reply, on_text))
        race: set[asyncio.Future[Any]] = {stream}
        if cancelled is not None:
            race.add(asyncio.ensure_future(cancelled()))
        try:
            await asyncio.wait(race, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in race:
                if not task.done():
                    task.cancel()
            await asyncio.wait(race)
        if stream.cancelled():
            message = ChatMessage(role="assistant", content=reply.text)
            return ModelReply(message, finish_reason="cancelled", model=self.name)
        try:
            return stream.result()
        except ModelError as error:
            raise ModelError(public(str(error), (key,) if key else ())) from None

    async def _stream(
        self, request: ModelRequest, key: str | None, reply: StreamedReply, on_text: TextSink
    ) -> ModelReply:
        stream = self._config.stream_tools or not request.tools
        body = request_body(self._config.model, request, self._max_tokens(request), stream=stream)
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        timeout = httpx.Timeout(self._config.timeout, connect=min(self._config.timeout, 10.0))
        clock = Stopwatch()
        try:
            async with self._client.stream(
                "POST", self._url, content=json.dumps(body), headers=headers, timeout=timeout
            ) as response:
                await self._check_status(response)
                await self._read(response, reply, on_text, clock)
        except httpx.TimeoutException as error:
            raise ModelError(
                f"The model {self.name!r} at {self._where} sent nothing for "
                f"{self._config.timeout:g} s ({_describe(error)})."
            ) from None
        except httpx.HTTPError as error:
            raise ModelError(
                f"The model {self.name!r} could not be reached at {self._where}, or "
                f"it closed the connection mid-reply: {_describe(error)}."
            ) from None
        result = reply.reply(request)
        timing = clock.timing(result.usage.completion_tokens)
        return msgspec.structs.replace(result, model=self.name, timing=timing)

    def _max_tokens(self, request: ModelRequest) -> int:
        ceiling = self._config.max_tokens
        return min(request.max_tokens, ceiling) if ceiling else request.max_tokens

    async def _check_status(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        said = error_message((await response.aread())[:4096])
        raise ModelError(
            f"The model {self.name!r} at {self._where} answered "
            f"{response.status_code} {response.reason_phrase}: {said}"
        )

    async def _read(
        self, response: httpx.Response, reply: StreamedReply, on_text: TextSink, clock: Stopwatch
    ) -> None:
        if response.headers.get("content-type", "").startswith("application/json"):
            await self._read_whole(response, reply, on_text, clock)
            return
        async for line in response.aiter_lines():
            data = sse_data(line)
            if data is None or not data:
                continue
            if data == "[DONE]":
                return
            try:
                chunk = json.loads(data)
            except ValueError:
                raise ModelError(
                    f"The model {self.name!r} sent a stream chunk that is not JSON: {data[:80]!r}."
                ) from None
            before = reply.chunks
            text = reply.add(chunk)
            if reply.chunks > before:
                clock.token()
            if text:
                on_text(text)
        if not reply.finish:
            raise ModelError(f"The model {self.name!r} ended its stream before the reply was done.")

    async def _read_whole(
        self, response: httpx.Response, reply: StreamedReply, on_text: TextSink, clock: Stopwatch
    ) -> None:
        """A reply that was not streamed (asked so, or a server that ignores `stream`)."""
        text = reply.add_whole(await _whole_body(response, self.name))
        clock.token()
        if text:
            on_text(text)


async def _whole_body(response: httpx.Response, name: str) -> dict[str, Any]:
    try:
        body = json.loads(await response.aread())
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ModelError(f"The model {name!r} answered with a body that is not a JSON object.")
    return body


_FAILURES: tuple[tuple[type[httpx.HTTPError], str], ...] = (
    (httpx.ConnectTimeout, "connecting timed out"),
    (httpx.ReadTimeout, "waiting for its answer timed out"),
    (httpx.TimeoutException, "the request timed out"),
    (httpx.ConnectError, "the connection was refused or the host is unknown"),
    (httpx.RemoteProtocolError, "the server broke off or answered outside HTTP"),
    (httpx.ReadError, "the connection broke while reading"),
    (httpx.WriteError, "the connection broke while sending"),
    (httpx.UnsupportedProtocol, "its URL is not http:// or https://"),
    (httpx.TooManyRedirects, "it redirected too often"),
)


def _describe(error: httpx.HTTPError) -> str:
    """What went wrong, as a phrase of ours: an exception's own text is the library's."""
    return next((said for kind, said in _FAILURES if isinstance(error, kind)), "the request failed")
