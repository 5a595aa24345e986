"""End-user tokens and conversation addresses (pure): only the registered algorithm
verifies, and an address is derived from tenant, kind and user alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from schemas.address import parse_address
from schemas.tenant import EndUsers
from services.endusers import TokenError, conversation_address, problem, user_of, visitor_of
from services.endusers import visitor_token as new_visitor

SECRET = "s" * 40
KEY = "k1a2b3c4d5e6"
"""The publishable key tokens are signed for (`aud`)."""


def now() -> float:
    return time.time()  # noqa: TID251 - a token's exp is wall-clock time


def user(token: str, registered: EndUsers, key: str = KEY) -> str:
    return user_of(token, registered, key, now())


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
        signed = jwt.encode(
            {"sub": "alice", "exp": later(), "aud": KEY}, private, algorithm=algorithm
        )
        assert user(signed, registered) == "alice"
    public = pem(rsa_key)
    forged = hs256_by_hand({"sub": "mallory", "exp": later(), "aud": KEY}, public.encode())
    with pytest.raises(TokenError, match="not signed with RS256"):
        user(forged, EndUsers("RS256", public))


def test_an_unsigned_token_is_refused() -> None:
    unsigned = jwt.encode({"sub": "alice", "exp": later(), "aud": KEY}, "", algorithm="none")
    with pytest.raises(TokenError, match="not signed with HS256"):
        user(unsigned, EndUsers("HS256", SECRET))


def test_audience_and_issuer_are_checked_when_set() -> None:
    registered = EndUsers("HS256", SECRET, audience="teaspill", issuer="https://app")
    good = {"sub": "a", "exp": later(), "aud": [KEY, "teaspill"], "iss": "https://app"}
    assert user(jwt.encode(good, SECRET, algorithm="HS256"), registered) == "a"
    with pytest.raises(TokenError, match="does not name this tenant's audience"):
        user(jwt.encode({**good, "aud": [KEY, "other"]}, SECRET, algorithm="HS256"), registered)
    with pytest.raises(TokenError, match="iss other than"):
        user(jwt.encode({**good, "iss": "https://x"}, SECRET, algorithm="HS256"), registered)


def test_a_missing_issuer_is_named_as_one_this_tenant_needs() -> None:
    registered = EndUsers("HS256", SECRET, issuer="https://app")
    token = jwt.encode({"sub": "a", "exp": later(), "aud": KEY}, SECRET, algorithm="HS256")
    with pytest.raises(TokenError) as refused:
        user(token, registered)
    assert str(refused.value) == (
        "the end-user token has no iss claim: this tenant's tokens need sub, exp, aud, iss"
    )


def test_a_token_is_for_one_publishable_key() -> None:
    registered = EndUsers("HS256", SECRET)
    token = jwt.encode({"sub": "a", "exp": later(), "aud": KEY}, SECRET, algorithm="HS256")
    assert user(token, registered) == "a"
    with pytest.raises(TokenError) as refused:
        user(token, registered, key="k2")
    assert str(refused.value) == (
        "the end-user token is not for publishable key k2: its aud must name the key's id "
        "(a token is signed for one key)"
    )
    unbound = jwt.encode({"sub": "a", "exp": later()}, SECRET, algorithm="HS256")
    with pytest.raises(TokenError, match="has no aud claim"):
        user(unbound, registered)


def test_a_token_that_lives_past_a_day_is_refused() -> None:
    registered = EndUsers("HS256", SECRET)
    start = int(now())
    day = {"sub": "a", "aud": KEY, "iat": start, "exp": start + 24 * 3600}
    assert user(jwt.encode(day, SECRET, algorithm="HS256"), registered) == "a"
    for long in (
        {**day, "exp": start + 25 * 3600},
        {"sub": "a", "aud": KEY, "exp": start + 90_000},
    ):
        with pytest.raises(TokenError) as refused:
            user(jwt.encode(long, SECRET, algorithm="HS256"), registered)
        assert str(refused.value).startswith("the end-user token lives 25 hours, more than the 24")


def test_a_visitor_token_is_for_the_key_that_asked_for_it() -> None:
    made = datetime.now(UTC)  # noqa: TID251 - a token's exp is wall-clock time
    visitor, token = new_visitor(SECRET, "acme", KEY, made)
    assert visitor_of(token, SECRET, "acme", KEY) == visitor
    with pytest.raises(TokenError, match="issued for another publishable key than k2"):
        visitor_of(token, SECRET, "acme", "k2")


def test_a_sub_may_not_pass_for_a_visitor() -> None:
    token = jwt.encode(
        {"sub": "visitor:abc", "exp": later(), "aud": KEY}, SECRET, algorithm="HS256"
    )
    with pytest.raises(TokenError, match="may not begin with 'visitor:'"):
        user(token, EndUsers("HS256", SECRET))


def test_registrations_that_cannot_work_say_why() -> None:
    assert "at least 32 bytes" in (problem(EndUsers("HS256", "short")) or "")
    assert "not a PEM public key" in (problem(EndUsers("RS256", "nonsense")) or "")
    ec_pem = pem(ec.generate_private_key(ec.SECP256R1()))
    assert "of another type" in (problem(EndUsers("RS256", ec_pem)) or "")
    weak = pem(rsa.generate_private_key(public_exponent=65537, key_size=1024))  # noqa: S505 - the weak key refused
    assert problem(EndUsers("RS256", weak)) == (
        "the RS256 key has 1024 bits: an RSA key needs at least 2048"
    )


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
