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


def new_key(tenant: str, scope: Scope, now: datetime) -> tuple[str, ApiKey]:
    key_id = secrets.token_hex(6)
    plaintext = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    return plaintext, ApiKey(key_id, tenant, scope, hash_key(plaintext), now)


def well_formed(plaintext: str) -> bool:
    return _FORMAT.match(plaintext) is not None


def allows(granted: Scope, needed: Scope) -> bool:
    """`admin` may do what `write` may, and `write` what `read` may."""
    return SCOPES.index(granted) >= SCOPES.index(needed)


def same_hash(a: str, b: str) -> bool:
    return hmac.compare_digest(a, b)
