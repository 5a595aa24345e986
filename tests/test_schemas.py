"""The wire types: published schemas are current, payloads round-trip, old ones decode."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.address import InvalidAddressError, child_address, parse_address
from schemas.events import ApprovalRefused, Event, StopRefused, TurnEnded, TurnStarted
from schemas.export import HERE, PUBLISHED, render
from schemas.model import ModelReply
from schemas.state import AgentRecord, StoredAgent
from schemas.wake import Message, WakeEnvelope


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_committed_json_schema_matches_the_code(name: str) -> None:
    committed = (HERE / name).read_text()
    assert committed == render(PUBLISHED[name]), "run `python -m schemas.export`"


segments = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,10}", fullmatch=True)


@given(tenant=segments, path=st.lists(segments, min_size=1, max_size=4))
def test_addresses_round_trip_and_children_stay_valid(tenant: str, path: list[str]) -> None:
    address = parse_address(".".join([tenant, *path]))
    assert parse_address(str(address)) == address
    child = child_address(address, turn=3, round_=2, index=1)
    assert parse_address(str(child)) == child
    assert child.depth == address.depth + 1
    assert str(child).startswith(str(address) + ".")


@pytest.mark.parametrize("bad", ["", "acme", "acme.", ".x", "ACME.x", "acme.x y", "acme/x"])
def test_invalid_addresses_are_refused_with_a_sentence(bad: str) -> None:
    with pytest.raises(InvalidAddressError, match="agent address"):
        parse_address(bad)


texts = st.text(max_size=50)


@given(text=texts, seq=st.integers(1, 10**9), turn=st.integers(1, 10**6))
def test_events_round_trip(text: str, seq: int, turn: int) -> None:
    at = datetime(2026, 11, 30, tzinfo=UTC)
    bodies = (
        TurnStarted(text, "kind", 2),
        TurnEnded("failed", reason=text),
        ApprovalRefused(text, "already_answered", approve=True, by=text, message=text),
        StopRefused(message=text),
    )
    for body in bodies:
        event = Event("acme.bot", seq, turn, 0, at, body)
        assert msgspec.json.decode(msgspec.json.encode(event), type=Event) == event


OLD_PAYLOADS = [
    (
        b'{"agent":"acme.bot","seq":1,"turn":1,"round":0,"at":"2026-11-30T00:00:00Z",'
        b'"body":{"type":"turn_started","text":"hi","spec_kind":"k","spec_version":1}}',
        Event,
    ),
    (b'{"wake":{"type":"message","text":"hi"}}', WakeEnvelope),
    (
        b'{"agent":"acme.bot","seq":4,"turn":1,"round":1,"at":"2026-11-30T00:00:00Z",'
        b'"body":{"type":"approval_answered","request_id":"t1r1-call_0","approve":true}}',
        Event,
    ),
    (
        b'{"agent":"acme.bot","seq":2,"turn":1,"round":1,"at":"2026-11-30T00:00:00Z",'
        b'"body":{"type":"model_message","model":"smollm2","text":"hello"}}',
        Event,
    ),
    (b'{"turns":3,"timeline":{"last_seq":9,"chunks":2}}', AgentRecord),
    (b'{"version":1,"record":{"turns":3},"finished":"inv_1"}', StoredAgent),
    (b'{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}', ModelReply),
]


@pytest.mark.parametrize(("payload", "kind"), OLD_PAYLOADS)
def test_payloads_written_by_earlier_versions_still_decode(payload: bytes, kind: type) -> None:
    assert msgspec.json.decode(payload, type=kind) is not None


def test_a_wake_envelope_is_what_ingress_callers_send() -> None:
    decoded = msgspec.json.decode(b'{"wake":{"type":"message","text":"hi"}}', type=WakeEnvelope)
    assert decoded == WakeEnvelope(Message("hi"))
