"""A transport whose tool results always say whether they are complete.

The 2026-07-28 revision says a result without `resultType` is complete; the `mcp` SDK
(2.3.0) refuses such a result of a `tools/call` instead. This wraps a transport's read
stream and marks a tool result that names no `resultType` (and asks for no input)
`complete` as it arrives, which is what the revision says it is. The earlier revisions
have no such field, and the SDK drops it from their results, so marking them changes
nothing there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Protocol

import mcp_types
from mcp.client import Transport
from mcp.shared.message import SessionMessage

Item = SessionMessage | Exception


class _Reader(Protocol):
    async def receive(self) -> Item: ...
    async def aclose(self) -> None: ...
    async def __anext__(self) -> Item: ...


@asynccontextmanager
async def completing(transport: Transport) -> AsyncIterator[Any]:
    """`transport`, its read stream passed through `completed`."""
    async with transport as (read, write):
        yield _Completed(read), write


def completed(item: Item) -> Item:
    """`item`, with a tool result that names no `resultType` marked complete."""
    if not isinstance(item, SessionMessage):
        return item
    message = item.message
    if not isinstance(message, mcp_types.JSONRPCResponse):
        return item
    result: dict[str, Any] = message.result
    if "content" not in result or "resultType" in result or "inputRequests" in result:
        return item
    marked = message.model_copy(update={"result": {**result, "resultType": "complete"}})
    return SessionMessage(marked, item.metadata)


class _Completed:
    """The transport's read stream, each item passed through `completed`."""

    def __init__(self, inner: _Reader) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        # what a reader may look up on the stream it was given (`last_context`)
        return getattr(self._inner, name)

    async def receive(self) -> Item:
        return completed(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Completed:
        return self

    async def __anext__(self) -> Item:
        return completed(await self._inner.__anext__())

    async def __aenter__(self) -> _Completed:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
