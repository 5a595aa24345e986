"""End-user tokens and conversation addresses (pure): only the registered algorithm
verifies, and an address is derived from tenant, kind and user alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from schemas.address import parse_address
from schemas.tenant import EndUsers
from services.endusers import TokenError, conversation_address, problem, user_of

SECRET = "s" * 40


def later() -> int:
    """An expiry five minutes from now, taken when a test signs its token: a module-level
    constant would expire before the test runs in a long suite."""
    return int(time.time()) + 300  # noqa: TID251 - a token's exp is wall-clock time


def pem(private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def hs256_by_hand(claims: dict[str, object], key: bytes) -> str:
    """What an attacker makes of a public key: an HS256 token with it as the secret (PyJWT
    refuses to sign one)."""

    def part(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    signing = part(b'{"alg":"HS256","typ":"JWT"}') + "." + part(json.dumps(claims).encode())
    return signing + "." + part(hmac.new(key, signing.encode(), hashlib.sha256).digest())


def test_rs256_and_es256_verify_with_the_public_key_and_refuse_hs256_made_with_it() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    for algorithm, private in (("RS256", rsa_key), ("ES256", ec_key)):
        registered = EndUsers(algorithm, pem(private))  # type: ignore[arg-type]
        assert problem(registered) is None
        signed = jwt.encode({"sub": "alice", "exp": later()}, private, algorithm=algorithm)
        assert user_of(signed, registered) == "alice"
    public = pem(rsa_key)
    forged = hs256_by_hand({"sub": "mallory", "exp": later()}, public.encode())
    with pytest.raises(TokenError, match="not signed with RS256"):
        user_of(forged, EndUsers("RS256", public))


def test_an_unsigned_token_is_refused() -> None:
    unsigned = jwt.encode({"sub": "alice", "exp": later()}, "", algorithm="none")
    with pytest.raises(TokenError, match="not signed with HS256"):
        user_of(unsigned, EndUsers("HS256", SECRET))


def test_audience_and_issuer_are_checked_when_set() -> None:
    registered = EndUsers("HS256", SECRET, audience="teaspill", issuer="https://app")
    good = {"sub": "a", "exp": later(), "aud": "teaspill", "iss": "https://app"}
    assert user_of(jwt.encode(good, SECRET, algorithm="HS256"), registered) == "a"
    with pytest.raises(TokenError, match="aud other than"):
        user_of(jwt.encode({**good, "aud": "other"}, SECRET, algorithm="HS256"), registered)
    with pytest.raises(TokenError, match="iss other than"):
        user_of(jwt.encode({**good, "iss": "https://x"}, SECRET, algorithm="HS256"), registered)


def test_a_sub_may_not_pass_for_a_visitor() -> None:
    token = jwt.encode({"sub": "visitor:abc", "exp": later()}, SECRET, algorithm="HS256")
    with pytest.raises(TokenError, match="may not begin with 'visitor:'"):
        user_of(token, EndUsers("HS256", SECRET))


def test_registrations_that_cannot_work_say_why() -> None:
    assert "at least 32 bytes" in (problem(EndUsers("HS256", "short")) or "")
    assert "not a PEM public key" in (problem(EndUsers("RS256", "nonsense")) or "")
    ec_pem = pem(ec.generate_private_key(ec.SECP256R1()))
    assert "of another type" in (problem(EndUsers("RS256", ec_pem)) or "")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("acme", "helper", "alice"), ("acme", "helper", "bob")),
        (("acme", "helper", "alice"), ("acme", "other", "alice")),
        (("acme", "a", "b,c"), ("acme", "a,b", "c")),
    ],
)
def test_addresses_are_valid_stable_and_never_shared(
    one: tuple[str, str, str], other: tuple[str, str, str]
) -> None:
    assert conversation_address(*one) == conversation_address(*one)
    assert conversation_address(*one) != conversation_address(*other)
    parsed = parse_address(conversation_address(*one))
    assert parsed.tenant == "acme"
    assert parsed.depth == 0
