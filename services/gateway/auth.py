"""API keys: who is asking, for which tenant, with which scope.

Every `/v1/` route but `/v1/health`, `/mcp` and `/a2a`, need
`Authorization: Bearer tsk_<id>_<secret>`. The key is checked by middleware before anything
else is read, so a request without a valid key learns nothing (401). An address of another
tenant is answered exactly like an agent that does not exist (404), whatever the key's
scope. A publishable key is checked further, for its origin, its routes and its end user
(`publishable`), and reaches only its end user's conversations.
"""

# No `from __future__ import annotations` here: FastAPI reads the annotations of the
# dependencies made inside `require` and `owned`, which name their local `needed`, and
# a string annotation cannot be resolved outside the function that made it.

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from schemas.address import InvalidAddressError, parse_address
from schemas.tenant import Scope as KeyScope
from services.gateway import publishable
from services.gateway.errors import ApiError, has_body, other_tenant, send_error, unknown_agent
from services.gateway.keycache import Held, KeyCache
from services.gateway.rates import RateLimiter
from services.keys import PUBLISHABLE, allows, hash_key, well_formed

PRINCIPAL = "teaspill.principal"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
PUBLIC = frozenset({"/v1/health"})
MCP = "/mcp"
"""The MCP endpoint (`mcp_server`): its key is checked here like any route's."""
A2A = "/a2a"
"""The A2A agents and their cards (`a2a_server`), keyed the same way."""

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    description="An API key `tsk_<id>_<secret>`, scoped to one tenant and to read, write or "
    "admin, or publishable (with an end-user token in `Teaspill-User`).",
)


@dataclass(frozen=True)
class Principal:
    tenant: str
    scope: KeyScope
    key_id: str
    key_name: str = ""
    user: str = ""
    """A publishable key's end user, as the request's token names them ('' for none)."""
    conversations: tuple[tuple[str, str], ...] = ()
    """A publishable key's (kind, address) of each conversation its end user may have."""
    visitors: bool = False
    """Whether a publishable key's tenant takes visitors without an end-user token."""

    @property
    def bucket(self) -> str:
        """What rates and stream slots are counted by: the key, or a publishable key's end
        user (a page's visitors do not share one budget)."""
        return f"{self.key_id}/{self.user}" if self.user else self.key_id

    def kind_of(self, address: str) -> str | None:
        """The kind of the end user's conversation at `address`; None if it is not one."""
        return next((kind for kind, at in self.conversations if at == address), None)


def needs_key(path: str) -> bool:
    if path.startswith("/v1/"):
        return path not in PUBLIC
    return path in {MCP, A2A} or path.startswith(f"{A2A}/")


async def authenticate(keys: KeyCache, header: str | None) -> Held:
    if not header:
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'", CHALLENGE)
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not well_formed(token):
        raise ApiError(
            401,
            "malformed Authorization header: expected 'Bearer tsk_<id>_<secret>'",
            CHALLENGE,
        )
    key = await keys.find(hash_key(token))
    if key is None:
        raise ApiError(401, "unknown API key", CHALLENGE)
    if key.key.revoked_at is not None:
        raise ApiError(401, f"API key {key.key.id} was revoked", CHALLENGE)
    if key.tombstone is not None:
        raise ApiError(401, key.tombstone.sentence(key.key.tenant), CHALLENGE)
    return key


class AuthMiddleware:
    """The key, then its rate (`rates.RateLimiter`), before anything else is read; CORS for
    publishable keys (`publishable`)."""

    def __init__(
        self, app: ASGIApp, keys: KeyCache, rates: RateLimiter, visitors: Callable[[], str]
    ) -> None:
        self.app = app
        self.keys = keys
        self.rates = rates
        self.visitors = visitors
        """The secret visitor tokens are signed with (read when first needed)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_key(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if publishable.is_preflight(scope["method"], headers):
            listed = origin is not None and await self.keys.listed(origin)
            await publishable.preflight(send, origin or "", listed)
            return
        try:
            principal, send = await self._principal(scope, headers, send)
            self.rates.take(principal.bucket)
        except ApiError as error:
            if origin is not None and await self.keys.listed(origin):
                send = publishable.with_cors(send, origin)
            await send_error(send, error, unread_body=has_body(headers))
            return
        await self.app({**scope, PRINCIPAL: principal}, receive, send)

    async def _principal(
        self, scope: Scope, headers: Headers, send: Send
    ) -> tuple[Principal, Send]:
        """The caller, and `send` with the CORS headers its origin is allowed."""
        held = await authenticate(self.keys, headers.get("authorization"))
        key = held.key
        if key.scope != PUBLISHABLE:
            return Principal(key.tenant, key.scope, key.id, key.name), send
        origin = publishable.checked_origin(held, headers.get("origin"))
        send = publishable.with_cors(send, origin)
        publishable.checked_route(held, scope["method"], scope["path"])
        user = publishable.end_user(held, headers, scope["path"], self.visitors)
        found = Principal(
            key.tenant,
            key.scope,
            key.id,
            key.name,
            user,
            publishable.conversations(held, user),
            held.end_users.anonymous,
        )
        return found, send


def principal(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> Principal:
    found = request.scope.get(PRINCIPAL)
    if not isinstance(found, Principal):
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'", CHALLENGE)
    return found


def require(needed: KeyScope) -> Callable[[Principal], Principal]:
    """A dependency: the caller, if its key's scope covers `needed` (admin > write > read)."""

    def dependency(caller: Annotated[Principal, Depends(principal)]) -> Principal:
        if not allows(caller.scope, needed):
            raise ApiError(
                403, f"this route needs {_article(needed)} {needed} key; this key is {caller.scope}"
            )
        return caller

    return dependency


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


@dataclass(frozen=True)
class Owned:
    """An agent address of the caller's tenant."""

    caller: Principal
    address: str


AddressParam = Annotated[
    str,
    Path(
        max_length=200,
        description="The agent's address, `tenant.name[.child...]`; the tenant is the key's.",
        examples=["acme.alpha"],
    ),
]


def owned(needed: KeyScope) -> Callable[[Principal, str], Owned]:
    """A dependency: the path's address, as `own` checks it."""

    def dependency(
        caller: Annotated[Principal, Depends(principal)], address: AddressParam
    ) -> Owned:
        return own(caller, address, needed)

    return dependency


def own(
    caller: Principal, address: str, needed: KeyScope, *, doing: str = "this route", field: str = ""
) -> Owned:
    """The address, checked for form and tenant before the scope, so another tenant's
    address is 404 whatever the key may do: a key learns nothing of another tenant's agents,
    not even from a 403. `field` names where the address came from in a 400; `doing`, what
    needs the scope in a 403."""
    try:
        parsed = parse_address(address)
    except InvalidAddressError as error:
        raise ApiError(400, f"{field}: {error}" if field else str(error)) from error
    if parsed.tenant != caller.tenant:
        raise other_tenant(address, caller.tenant)
    if caller.scope == PUBLISHABLE:
        return _conversation(caller, address, needed, doing)
    if not allows(caller.scope, needed):
        raise ApiError(
            403, f"{doing} needs {_article(needed)} {needed} key; this key is {caller.scope}"
        )
    return Owned(caller, address)


def _conversation(caller: Principal, address: str, needed: KeyScope, doing: str) -> Owned:
    """A publishable key reads and writes its end user's conversations, and nothing else:
    any other address is an agent that does not exist, whoever it belongs to."""
    if caller.kind_of(address) is None:
        raise unknown_agent(address)
    if needed not in ("read", "write"):
        raise ApiError(
            403, f"{doing} needs {_article(needed)} {needed} key; this key is publishable"
        )
    return Owned(caller, address)
