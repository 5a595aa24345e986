"""The HTTP status of the MCP server's answers that refuse a request for the key's limits.

The SDK sends a JSON-RPC error with the status its table gives the error's code (200 or
400). A refusal past the key's stream slots carries `"data": {"status": 429}`: it is sent
as HTTP 429 with `Retry-After`, as every other route refuses it, and its body stays the
JSON-RPC error (the request's id and the sentence), so an MCP client still reads it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Send

TOO_MANY = 429
MOST_READ = 65_536
"""A larger answer is a result, never a refusal: it is not read."""


def statused(send: Send) -> Send:
    """`send`, with a JSON answer that is such a refusal sent as HTTP 429."""
    held: list[Message] = []

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and _json(message):
            held.append(message)
            return
        if held and message["type"] == "http.response.body":
            start = held.pop()
            body = message.get("body", b"")
            if not message.get("more_body") and _too_many(body):
                retry = [(b"retry-after", b"1")]
                start = {**start, "status": TOO_MANY, "headers": [*start["headers"], *retry]}
            await send(start)
        await send(message)

    return sending


def _json(start: Message) -> bool:
    headers: list[tuple[bytes, bytes]] = start.get("headers", [])
    return any(
        k.lower() == b"content-type" and v.startswith(b"application/json") for k, v in headers
    )


def _too_many(body: bytes) -> bool:
    if len(body) > MOST_READ:
        return False
    try:
        answer: Any = json.loads(body)
    except ValueError:
        return False
    error = answer.get("error") if isinstance(answer, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    return isinstance(data, dict) and data.get("status") == TOO_MANY
