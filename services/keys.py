"""API keys: `tsk_<id>_<secret>`. Only a hash of the secret is stored; the key is shown
once, when it is made."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from urllib.parse import urlsplit

from schemas.spec import KIND_PATTERN
from schemas.tenant import ApiKey, Scope

PREFIX = "tsk"
_FORMAT = re.compile(r"^tsk_([a-z0-9]{12})_([A-Za-z0-9_-]{32,64})\Z")
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
"""The tenant-wide scopes, each allowing what the one before does."""
PUBLISHABLE: Scope = "publishable"
MAX_ORIGINS = 20
MAX_KINDS = 20


def hash_key(plaintext: str) -> str:
    """SHA-256 of the whole key: keys are random and long, so no slow hash is needed."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


NAME_PATTERN = r"^[A-Za-z0-9 ._@-]{0,60}$"
"""A key's name: a few words a person can read, nothing that needs escaping."""


def new_key(
    tenant: str,
    scope: Scope,
    now: datetime,
    name: str = "",
    *,
    origins: tuple[str, ...] = (),
    kinds: tuple[str, ...] = (),
) -> tuple[str, ApiKey]:
    key_id = secrets.token_hex(6)
    plaintext = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    hashed = hash_key(plaintext)
    key = ApiKey(key_id, tenant, scope, hashed, now, name=name, origins=origins, kinds=kinds)
    return plaintext, key


def origin_problem(origin: str) -> str | None:
    """Why `origin` is not an origin a browser sends (`https://host[:port]`, lower case,
    no path), or None."""
    parts = urlsplit(origin)
    well_formed = (
        parts.scheme in ("http", "https")
        and parts.hostname is not None
        and origin == f"{parts.scheme}://{parts.netloc}"
        and origin == origin.lower()
        and "@" not in parts.netloc
    )
    if well_formed:
        return None
    return (
        f"{origin!r} is not an origin: write it as a browser sends it, "
        "'https://host' or 'http://host:port', lower case, without a path or a trailing '/'"
    )


def publishable_problem(
    scope: Scope, origins: tuple[str, ...], kinds: tuple[str, ...]
) -> str | None:
    """Why a key of `scope` cannot have these origins and kinds, or None: a publishable key
    needs at least one of each; the other scopes take none."""
    if scope != PUBLISHABLE:
        taken = bool(origins or kinds)
        return (
            f"a {scope} key takes no origins or kinds: only a publishable key has them"
            if taken
            else None
        )
    if not origins or not kinds:
        return (
            "a publishable key needs at least one origin (the pages that may use it) and "
            "one kind (the agents its end users may talk to)"
        )
    if len(origins) > MAX_ORIGINS or len(kinds) > MAX_KINDS:
        return f"a publishable key takes at most {MAX_ORIGINS} origins and {MAX_KINDS} kinds"
    problems = [p for o in origins if (p := origin_problem(o)) is not None] + [
        f"{kind!r} is not a kind: 1 to 48 letters, digits, '-' and '_'"
        for kind in kinds
        if re.fullmatch(KIND_PATTERN, kind) is None
    ]
    return problems[0] if problems else None


def valid_name(name: str) -> bool:
    return re.fullmatch(NAME_PATTERN, name) is not None


def signature(key_id: str, name: str) -> str:
    """How an answer's author is shown: the key's name and id, or its id alone."""
    return f"{name} ({key_id})" if name else key_id


def well_formed(plaintext: str) -> bool:
    return _FORMAT.match(plaintext) is not None


def allows(granted: Scope, needed: Scope) -> bool:
    """`admin` may do what `write` may, and `write` what `read` may; a publishable key
    holds none of them (what it may do is decided by the conversations it reaches)."""
    if PUBLISHABLE in (granted, needed):
        return False
    return SCOPES.index(granted) >= SCOPES.index(needed)


def same_hash(a: str, b: str) -> bool:
    return hmac.compare_digest(a, b)
