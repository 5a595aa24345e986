"""API keys: who is asking, for which tenant, with which scope.

Every `/v1/` route but `/v1/health`, `/mcp` and `/a2a`, need
`Authorization: Bearer tsk_<id>_<secret>`. The key is checked by middleware before anything
else is read, so a request without a valid key learns nothing (401). An address of another
tenant is answered exactly like an agent that does not exist (404), whatever the key's
scope.
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
from services.gateway.errors import ApiError, other_tenant, send_error
from services.gateway.keycache import KeyCache
from services.gateway.rates import RateLimiter
from services.keys import allows, hash_key, well_formed

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
    description="An API key `tsk_<id>_<secret>`, scoped to one tenant and to read, write or admin.",
)


@dataclass(frozen=True)
class Principal:
    tenant: str
    scope: KeyScope
    key_id: str
    key_name: str = ""


def needs_key(path: str) -> bool:
    if path.startswith("/v1/"):
        return path not in PUBLIC
    return path in {MCP, A2A} or path.startswith(f"{A2A}/")


async def authenticate(keys: KeyCache, header: str | None) -> Principal:
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
    if key.revoked_at is not None:
        raise ApiError(401, f"API key {key.id} was revoked", CHALLENGE)
    return Principal(key.tenant, key.scope, key.id, key.name)


class AuthMiddleware:
    """The key, then its rate (`rates.RateLimiter`), before anything else is read."""

    def __init__(self, app: ASGIApp, keys: KeyCache, rates: RateLimiter) -> None:
        self.app = app
        self.keys = keys
        self.rates = rates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_key(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            principal = await authenticate(self.keys, Headers(scope=scope).get("authorization"))
            self.rates.take(principal.key_id)
        except ApiError as error:
            await send_error(send, error)
            return
        await self.app({**scope, PRINCIPAL: principal}, receive, send)


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
    if not allows(caller.scope, needed):
        raise ApiError(
            403, f"{doing} needs {_article(needed)} {needed} key; this key is {caller.scope}"
        )
    return Owned(caller, address)
