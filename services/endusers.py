"""End users: who a page's visitor is, as the product's backend signs it, and the address
of their conversation with an agent kind.

A tenant registers the key that verifies its end-user tokens (`EndUsers`): an HS256
secret, or an RS256 (2048 bits or more) or ES256 public key. A token is a JWT naming the
user (`sub`), for one publishable key (`aud` names the key's id, so the kinds and origins
of a key are a boundary a token of another key does not cross), with an expiry (`exp`)
at most `MAX_TOKEN_HOURS` ahead; the tenant's own `aud` and `iss` are checked too when it
set them. Only the registered algorithm is accepted, so a token cannot choose how it is
checked (no `none`, no HS256 signed with a public key).

A visitor without a token, when the tenant allows it, is given a visitor token by the
gateway (`tsv_<jwt>`, signed with a secret only the gateway holds) that names an id the
gateway chose, for the key that asked; it is presented like an end-user token.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from schemas.tenant import Algorithm, EndUsers

MIN_SECRET = 32
"""Bytes an HS256 secret needs at least (RFC 7518 asks for the hash's size)."""
MIN_RSA_BITS = 2048
MAX_TOKEN_HOURS = 24
"""The longest an end-user token may live: from its `iat` (or from now) to its `exp`."""
MAX_USER = 200
VISITOR = "visitor:"
"""How a visitor's user id begins; a token's `sub` may not, so the two never meet."""
VISITOR_PREFIX = "tsv_"
VISITOR_DAYS = 30
VISITOR_ISSUER = "teaspill"
ADDRESS_PREFIX = "u-"


class TokenError(ValueError):
    """A token that cannot be taken, with a sentence saying why."""


def problem(wanted: EndUsers) -> str | None:
    """Why a tenant cannot register `wanted`, or None."""
    if wanted.algorithm is None:
        return "no key without an algorithm: name HS256, RS256 or ES256" if wanted.key else None
    if not wanted.key:
        return f"{wanted.algorithm} needs a key: the HS256 secret, or the PEM public key"
    if wanted.algorithm == "HS256":
        return _secret_problem(wanted.key)
    try:
        loaded = verifying_key(wanted.algorithm, wanted.key)
    except ValueError as error:
        return str(error)
    if isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size < MIN_RSA_BITS:
        return f"the RS256 key has {loaded.key_size} bits: an RSA key needs at least {MIN_RSA_BITS}"
    return None


def _secret_problem(secret: str) -> str | None:
    if len(secret.encode()) < MIN_SECRET:
        return f"an HS256 secret needs at least {MIN_SECRET} bytes"
    if "-----BEGIN" in secret:
        return "an HS256 secret is a shared secret, not a PEM key: use RS256 or ES256"
    return None


@lru_cache(maxsize=256)
def verifying_key(algorithm: Algorithm, key: str) -> Any:
    """The key as PyJWT takes it: the secret's bytes, or the loaded public key (parsed once,
    not on every request)."""
    if algorithm == "HS256":
        return key.encode()
    try:
        loaded = load_pem_public_key(key.encode())
    except (ValueError, TypeError) as error:
        raise ValueError(f"the {algorithm} key is not a PEM public key") from error
    wanted = rsa.RSAPublicKey if algorithm == "RS256" else ec.EllipticCurvePublicKey
    if not isinstance(loaded, wanted):
        raise ValueError(f"the {algorithm} key is a PEM public key of another type")
    return loaded


def user_of(token: str, registered: EndUsers, key_id: str, now: float) -> str:
    """The user an end-user token names, once it is verified for the publishable key
    `key_id` at `now` (seconds since the epoch); else `TokenError`."""
    if registered.algorithm is None:
        raise TokenError(
            "this tenant has registered no end-user token key (PUT /v1/end-users): "
            "tokens cannot be checked"
        )
    claims = _claims(token, registered)
    _for_key(claims, registered, key_id)
    _short_lived(claims, now)
    subject = claims.get("sub")
    if not isinstance(subject, str) or not 1 <= len(subject) <= MAX_USER:
        raise TokenError(f"the end-user token's sub must be a string of 1 to {MAX_USER} characters")
    if subject.startswith(VISITOR):
        raise TokenError(f"the end-user token's sub may not begin with {VISITOR!r}")
    return subject


def _claims(token: str, registered: EndUsers) -> dict[str, Any]:
    assert registered.algorithm is not None
    try:
        return jwt.decode(
            token,
            verifying_key(registered.algorithm, registered.key),
            algorithms=[registered.algorithm],
            issuer=registered.issuer or None,
            options={"require": _required(registered), "verify_aud": False},
        )
    except jwt.PyJWTError as error:
        raise TokenError(_sentence(error, registered)) from error


def _required(registered: EndUsers) -> list[str]:
    return ["sub", "exp", "aud", *(["iss"] if registered.issuer else [])]


def _for_key(claims: dict[str, Any], registered: EndUsers, key_id: str) -> None:
    """`aud` names the key (and the tenant's audience, when it set one)."""
    aud = claims.get("aud")
    named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if key_id not in named:
        raise TokenError(
            f"the end-user token is not for publishable key {key_id}: its aud must name "
            "the key's id (a token is signed for one key)"
        )
    if registered.audience and registered.audience not in named:
        raise TokenError(
            f"the end-user token's aud does not name this tenant's audience "
            f"({registered.audience}) beside the key's id"
        )


def _short_lived(claims: dict[str, Any], now: float) -> None:
    exp, iat = claims["exp"], claims.get("iat")
    start = iat if isinstance(iat, int | float) and iat <= now else now
    hours = (float(exp) - float(start)) / 3600
    if hours > MAX_TOKEN_HOURS:
        raise TokenError(
            f"the end-user token lives {hours:.0f} hours, more than the "
            f"{MAX_TOKEN_HOURS} an end-user token may: sign it with an exp at most "
            f"{MAX_TOKEN_HOURS} hours after its iat"
        )


def _sentence(error: jwt.PyJWTError, registered: EndUsers) -> str:
    if isinstance(error, jwt.MissingRequiredClaimError):
        needed = ", ".join(_required(registered))
        return f"the end-user token has no {error.claim} claim: this tenant's tokens need {needed}"
    sentences: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
        (jwt.ExpiredSignatureError, "has expired: ask the product's backend for a new one"),
        (
            jwt.InvalidAlgorithmError,
            f"is not signed with {registered.algorithm}, the only algorithm this tenant takes",
        ),
        (jwt.InvalidSignatureError, "has a signature the tenant's key does not verify"),
        (jwt.InvalidIssuerError, f"has an iss other than {registered.issuer}"),
        (jwt.ImmatureSignatureError, "is not valid yet (its nbf or iat is in the future)"),
    )
    said = next((words for kind, words in sentences if isinstance(error, kind)), None)
    return f"the end-user token {said or 'is not a well-formed JWT'}"


def conversation_address(tenant: str, kind: str, user: str) -> str:
    """The address of `user`'s conversation with `kind`: derived from the three alone, one
    part of lower-case hex, so a page cannot choose it and two users never share one."""
    named = json.dumps([tenant, kind, user], ensure_ascii=True).encode()
    return f"{tenant}.{ADDRESS_PREFIX}{hashlib.sha256(named).hexdigest()[:40]}"


def visitor_token(secret: str, tenant: str, key_id: str, now: datetime) -> tuple[str, str]:
    """A new visitor of `tenant` through publishable key `key_id`: its user id and the
    token that names it."""
    user = f"{VISITOR}{secrets.token_hex(12)}"
    claims = {
        "sub": user,
        "tenant": tenant,
        "aud": key_id,
        "iss": VISITOR_ISSUER,
        "exp": now + timedelta(days=VISITOR_DAYS),
    }
    return user, VISITOR_PREFIX + jwt.encode(claims, secret, algorithm="HS256")


def visitor_of(token: str, secret: str, tenant: str, key_id: str) -> str:
    """The visitor a gateway-issued token names, for `tenant` and publishable key `key_id`;
    else `TokenError`."""
    try:
        claims = jwt.decode(
            token.removeprefix(VISITOR_PREFIX),
            secret,
            algorithms=["HS256"],
            issuer=VISITOR_ISSUER,
            audience=key_id,
            options={"require": ["sub", "exp", "tenant", "aud"]},
        )
    except jwt.ExpiredSignatureError as error:
        raise TokenError("the visitor token has expired: ask for a new one") from error
    except (jwt.InvalidAudienceError, jwt.MissingRequiredClaimError) as error:
        raise TokenError(
            f"the visitor token was issued for another publishable key than {key_id}: "
            "ask for a new one (POST /v1/visitors)"
        ) from error
    except jwt.PyJWTError as error:
        raise TokenError("the visitor token was not issued by this deployment") from error
    if claims["tenant"] != tenant or not str(claims["sub"]).startswith(VISITOR):
        raise TokenError("the visitor token was issued for another tenant")
    return str(claims["sub"])
