"""Publishable keys: a key a page ships in its HTML, and the end user it is presented with.

A publishable key is valid only in a request whose `Origin` it lists, and only on the
routes of a conversation (`PAGE_ROUTES`); there, it reaches only the conversations of
the end user its request names (`Teaspill-User`: an end-user token the product's backend
signed, or a visitor token this gateway issued when the tenant takes visitors), one
conversation per kind it lists, at an address derived from the tenant, the kind and the
user. Any other address is answered like an agent that does not exist (404).

CORS is answered here too: a preflight carries no key, so it is answered for the origins
publishable keys list (any tenant's); the answer to the request itself allows its origin
only when the request's key lists it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping

from starlette.types import Message, Send

from services.endusers import (
    VISITOR_PREFIX,
    TokenError,
    conversation_address,
    user_of,
    visitor_of,
)
from services.gateway.errors import ApiError
from services.gateway.keycache import Held

USER_HEADER = "teaspill-user"
PAGE_ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("GET", re.compile(r"^/v1/me$")),
    ("GET", re.compile(r"^/v1/me/conversations$")),
    ("POST", re.compile(r"^/v1/visitors$")),
    ("POST", re.compile(r"^/v1/agents/[^/]+/messages$")),
    ("GET", re.compile(r"^/v1/agents/[^/]+(/timeline|/events)?$")),
    ("POST", re.compile(r"^/v1/agents/[^/]+/page-calls/[^/]+/(claim|result)$")),
    ("POST", re.compile(r"^/v1/agui$")),
)
"""The only routes a publishable key may call."""
NEEDS_NO_USER = frozenset({"/v1/me", "/v1/visitors"})
ALLOWED_HEADERS = "authorization, content-type, idempotency-key, last-event-id, teaspill-user"
MAX_AGE = "600"
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def on_page_route(method: str, path: str) -> bool:
    return any(method == m and pattern.match(path) for m, pattern in PAGE_ROUTES)


def checked_origin(held: Held, origin: str | None) -> str:
    """The request's origin, if the key lists it; else 403."""
    if origin is None or origin not in held.key.origins:
        seen = f"origin {origin}" if origin else "a request without an Origin"
        raise ApiError(
            403,
            f"publishable key {held.key.id} is not valid from {seen}: it is valid only in "
            f"pages of {', '.join(held.key.origins)}",
        )
    return origin


def checked_route(held: Held, method: str, path: str) -> None:
    if not on_page_route(method, path):
        raise ApiError(
            403,
            f"a publishable key cannot call {method} {path}: it may only send messages to, "
            "read and follow the conversations of the end user it is presented with",
        )


def end_user(held: Held, headers: Mapping[str, str], path: str, visitors: Callable[[], str]) -> str:
    """The user the request names (verified), or '' on a route that needs none; else 401.
    `visitors`: the secret visitor tokens are signed with."""
    token = headers.get(USER_HEADER, "").strip()
    if not token:
        if path in NEEDS_NO_USER:
            return ""
        raise ApiError(401, _needs_user(held), CHALLENGE)
    try:
        if token.startswith(VISITOR_PREFIX):
            if not held.end_users.anonymous:
                raise TokenError("this tenant takes no visitors: the page needs an end-user token")
            return visitor_of(token, visitors(), held.key.tenant, held.key.id)
        return user_of(token, held.end_users, held.key.id, time.time())  # noqa: TID251 - exp is wall-clock
    except TokenError as error:
        raise ApiError(401, str(error), CHALLENGE) from error


def _needs_user(held: Held) -> str:
    visitors = ", or a visitor token from POST /v1/visitors" if held.end_users.anonymous else ""
    return (
        "this route needs an end-user token with the publishable key: send "
        f"'Teaspill-User: <token>' signed by the product's backend{visitors}"
    )


def conversations(held: Held, user: str) -> tuple[tuple[str, str], ...]:
    """(kind, address) of each conversation `user` may have through the key."""
    if not user:
        return ()
    tenant = held.key.tenant
    return tuple((kind, conversation_address(tenant, kind, user)) for kind in held.key.kinds)


# --- CORS -------------------------------------------------------------------------------


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    return (
        method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers
    )


async def preflight(send: Send, origin: str, listed: bool) -> None:
    """204 with the CORS headers for `origin` when a publishable key lists it; 403 with
    none otherwise."""
    if listed:
        headers = {
            **allow(origin),
            "access-control-allow-methods": "GET, POST",
            "access-control-allow-headers": ALLOWED_HEADERS,
            "access-control-max-age": MAX_AGE,
        }
        await _answer(send, 204, headers, b"")
        return
    body = b'{"error": {"status": 403, "message": "no publishable key lists this origin"}}'
    await _answer(send, 403, {"content-type": "application/json", "vary": "Origin"}, body)


def allow(origin: str) -> dict[str, str]:
    return {
        "access-control-allow-origin": origin,
        "access-control-expose-headers": "retry-after",
        "vary": "Origin",
    }


def with_cors(send: Send, origin: str) -> Send:
    """`send`, adding the headers that let `origin`'s page read the answer."""
    added = [(name.encode(), value.encode()) for name, value in allow(origin).items()]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *added]}
        await send(message)

    return sending


async def _answer(send: Send, status: int, headers: Mapping[str, str], body: bytes) -> None:
    raw = [(name.encode(), value.encode()) for name, value in headers.items()]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
