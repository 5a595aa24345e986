"""What verifying an end-user token costs a publishable key's request, per algorithm.

    python -m bench.tokens [--requests 5000]

Each round verifies one fresh-looking token (`services.endusers.user_of`: signature,
`exp`, `sub`, the registered algorithm only) the way the gateway does for every request
of a publishable key, with the registered key already parsed (it is parsed once and
kept). Prints p50 and p95 microseconds a verification for HS256, RS256 (2048-bit) and
ES256 (P-256), and the address derivation beside them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from schemas.tenant import Algorithm, EndUsers
from services.endusers import conversation_address, user_of

SECRET = "bench-secret-" + "x" * 40


def _public(private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


KEY_ID = "9c2e4a6b8d0f"
"""The publishable key the tokens are signed for (`aud`)."""


def cases() -> dict[str, tuple[str, EndUsers]]:
    """A token and the registration it verifies with, per algorithm."""
    later = int(time.time()) + 3600  # noqa: TID251 - not durable code
    claims = {"sub": "user-1842", "exp": later, "aud": KEY_ID}
    found: dict[str, tuple[str, EndUsers]] = {
        "HS256": (jwt.encode(claims, SECRET, algorithm="HS256"), EndUsers("HS256", SECRET))
    }
    keys: dict[Algorithm, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey] = {
        "RS256": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ES256": ec.generate_private_key(ec.SECP256R1()),
    }
    for algorithm, private in keys.items():
        token = jwt.encode(claims, private, algorithm=algorithm)
        found[algorithm] = (token, EndUsers(algorithm, _public(private)))
    return found


def timed(work: Callable[[], object], n: int) -> list[float]:
    work()
    spent = []
    for _ in range(n):
        start = time.perf_counter()
        work()
        spent.append((time.perf_counter() - start) * 1e6)
    return spent


def spread(spent: list[float]) -> str:
    p95 = statistics.quantiles(spent, n=20)[-1]
    return f"p50 {statistics.median(spent):7.1f}  p95 {p95:7.1f} µs"


def _verifying(token: str, registered: EndUsers) -> Callable[[], object]:
    return lambda: user_of(token, registered, KEY_ID, time.time())  # noqa: TID251 - not durable


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tokens", description=__doc__)
    parser.add_argument("--requests", type=int, default=5000)
    n = parser.parse_args().requests
    for name, (token, registered) in cases().items():
        print(f"{name:<22} {spread(timed(_verifying(token, registered), n))}")
    derive = timed(lambda: conversation_address("acme", "helper", "user-1842"), n)
    print(f"{'conversation_address':<22} {spread(derive)}")


if __name__ == "__main__":
    main()
