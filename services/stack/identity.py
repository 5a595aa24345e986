"""Restate's request identity: restate-server signs every request it sends the service
endpoint with a private key, and the endpoint serves only requests signed by a key it
knows. Without it, anything that can reach the endpoint's port could run any handler.

The key pair lives in the home (`identity/`, private key 0600), made on first use: the
stack points restate-server at the private key, and the endpoint accepts the public one
(and those in `TEASPILL_IDENTITY_KEYS`, for a restate-server with a key of its own).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

from services.settings import Settings

PRIVATE_KEY = Path("identity") / "restate-identity.pem"
PREFIX = "publickeyv1_"
ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


class IdentityError(Exception):
    """The identity key cannot be read or made; the message is a sentence."""


def private_key_file(home: Path) -> Path:
    """The private key restate-server signs with, made (0600, in a 0700 folder) when
    missing."""
    path = (home / PRIVATE_KEY).absolute()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    pem = Ed25519PrivateKey.generate().private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
    )
    made = path.with_suffix(".new")
    with contextlib.suppress(FileNotFoundError):
        made.unlink()
    descriptor = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    made.replace(path)
    return path


def public_key(home: Path) -> str:
    """The home's public key in Restate's notation (`publickeyv1_` and base58)."""
    path = private_key_file(home)
    try:
        key = load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as error:
        raise IdentityError(
            f"The request identity key {path} cannot be read: remove it and a new pair is "
            "made on the next start."
        ) from error
    if not isinstance(key, Ed25519PrivateKey):
        raise IdentityError(f"The request identity key {path} is not an Ed25519 key.")
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PREFIX + base58(raw)


def base58(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    encoded = ""
    while number:
        number, digit = divmod(number, 58)
        encoded = ALPHABET[digit] + encoded
    zeros = len(data) - len(data.lstrip(b"\0"))
    return ALPHABET[0] * zeros + encoded


def accepted_keys(settings: Settings) -> list[str]:
    """The keys the endpoint accepts: the setting's, else the home's own."""
    return list(settings.identity_keys) or [public_key(settings.home)]


if __name__ == "__main__":
    # `python -m services.stack.identity`: make the home's key pair if it is missing and
    # print the private key's path, for a restate-server started by hand.
    from services.settings import settings

    sys.stdout.write(f"{private_key_file(settings().home)}\n")
