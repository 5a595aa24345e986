"""Webhook signatures, as the Standard Webhooks specification has them.

A hook's secret is derived from the gateway's signing key and the hook's id, so it is
stored nowhere: not in Restate, not in the projection. A delivery is verified with the
`standardwebhooks` library (HMAC-SHA256 over `webhook-id.webhook-timestamp.body`), after
the timestamp is checked here to give a sentence that says which of the two was wrong.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.gateway.errors import ApiError
from services.settings import Settings

TOLERANCE = 300
"""Seconds a delivery's `webhook-timestamp` may be from now, either way (the library's)."""
PREFIX = "whsec_"


def key_file(config: Settings) -> Path:
    return config.hook_key_file or config.home / "hooks" / "signing.key"


class SigningKey:
    """The gateway's signing key, read (or made) on first use, not when the app is built."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._key: bytes | None = None

    def secret_for(self, hook_id: str) -> str:
        if self._key is None:
            try:
                self._key = signing_key(self.path)
            except (OSError, ValueError) as error:
                raise ApiError(
                    503,
                    "the gateway's webhook signing key (TEASPILL_HOOK_KEY_FILE) cannot be read "
                    "or made: its operator has to fix or remove the file",
                ) from error
        return secret_for(self._key, hook_id)


def signing_key(path: Path) -> bytes:
    """The key in `path`, made (0600) when missing; two gateways making it at once end up
    with the same one (the file is linked into place only if none is there)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        made = path.with_name(f".{path.name}.{os.getpid()}")
        descriptor = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(base64.b64encode(secrets.token_bytes(32)).decode())
        with contextlib.suppress(FileExistsError):
            os.link(made, path)
        made.unlink()
    key = base64.b64decode(path.read_text().strip(), validate=True)
    if len(key) < 32:
        raise ValueError("the signing key is shorter than 32 bytes")
    return key


def secret_for(key: bytes, hook_id: str) -> str:
    derived = hmac.new(key, f"teaspill hook {hook_id}".encode(), hashlib.sha256).digest()
    return PREFIX + base64.b64encode(derived).decode()


def verify(secret: str, body: bytes, headers: Mapping[str, str]) -> str:
    """The delivery's `webhook-id`, once its timestamp and signature are right; else 401."""
    webhook_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not webhook_id or not stamp or not headers.get("webhook-signature"):
        raise ApiError(
            401,
            "a delivery needs the headers webhook-id, webhook-timestamp and webhook-signature "
            "(Standard Webhooks)",
        )
    if len(webhook_id) > 200:
        raise ApiError(401, "webhook-id is longer than 200 characters")
    if not (webhook_id.isascii() and webhook_id.isprintable()):
        raise ApiError(401, "webhook-id may hold only printable ASCII characters")
    _check_time(stamp)
    try:
        Webhook(secret).verify(body, dict(headers), json_parse=False)
    except (WebhookVerificationError, ValueError) as error:
        raise ApiError(
            401, "the webhook-signature does not match this hook's secret for this body"
        ) from error
    return webhook_id


def _check_time(stamp: str) -> None:
    if not stamp.isdigit():
        raise ApiError(401, "webhook-timestamp must be whole seconds since 1970 (UTC)")
    off = int(stamp) - time.time()  # noqa: TID251 - the gateway is not durable code
    if abs(off) > TOLERANCE:
        raise ApiError(
            401,
            f"webhook-timestamp is {abs(off):.0f} s in the {'future' if off > 0 else 'past'}; "
            f"a delivery is taken within {TOLERANCE} s of now",
        )
