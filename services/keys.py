"""API keys: `tsk_<id>_<secret>`. Only a hash of the secret is stored; the key is shown
once, when it is made."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime

from schemas.tenant import ApiKey, Scope

PREFIX = "tsk"
_FORMAT = re.compile(r"^tsk_([a-z0-9]{12})_([A-Za-z0-9_-]{32,64})$")
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")


def hash_key(plaintext: str) -> str:
    """SHA-256 of the whole key: keys are random and long, so no slow hash is needed."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


NAME_PATTERN = r"^[A-Za-z0-9 ._@-]{0,60}$"
"""A key's name: a few words a person can read, nothing that needs escaping."""


def new_key(tenant: str, scope: Scope, now: datetime, name: str = "") -> tuple[str, ApiKey]:
    key_id = secrets.token_hex(6)
    plaintext = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    return plaintext, ApiKey(key_id, tenant, scope, hash_key(plaintext), now, name=name)


def valid_name(name: str) -> bool:
    return re.fullmatch(NAME_PATTERN, name) is not None


def signature(key_id: str, name: str) -> str:
    """How an answer's author is shown: the key's name and id, or its id alone."""
    return f"{name} ({key_id})" if name else key_id


def well_formed(plaintext: str) -> bool:
    return _FORMAT.match(plaintext) is not None


def allows(granted: Scope, needed: Scope) -> bool:
    """`admin` may do what `write` may, and `write` what `read` may."""
    return SCOPES.index(granted) >= SCOPES.index(needed)


def same_hash(a: str, b: str) -> bool:
    return hmac.compare_digest(a, b)
