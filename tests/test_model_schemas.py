"""Model chains and timings in the schemas: payloads written before them still decode."""

from __future__ import annotations

import msgspec

from schemas.events import Event, ModelFallback, ModelMessage
from schemas.model import ModelReply, ModelRequest, Timing
from schemas.spec import AgentSpec


def test_a_spec_naming_one_model_has_no_fallback_and_may_go_anywhere() -> None:
    spec = msgspec.json.decode(
        b'{"kind":"k","instructions":"Be brief.","model":"smollm2"}', type=AgentSpec
    )
    assert (spec.model, spec.fallback, spec.local_only) == ("smollm2", (), False)


def test_a_spec_with_a_chain_round_trips() -> None:
    spec = AgentSpec("k", "Be brief.", model="vllm", fallback=("smollm2",), local_only=True)
    assert msgspec.json.decode(msgspec.json.encode(spec), type=AgentSpec) == spec


def test_an_old_model_message_decodes_with_no_timing() -> None:
    old = (
        b'{"agent":"acme.bot","seq":2,"turn":1,"round":1,"at":"2026-11-30T00:00:00Z",'
        b'"body":{"type":"model_message","model":"smollm2","text":"hi",'
        b'"usage":{"prompt_tokens":9,"completion_tokens":2,"cached_tokens":0}}}'
    )
    body = msgspec.json.decode(old, type=Event).body
    assert isinstance(body, ModelMessage)
    assert body.timing == Timing()


def test_old_requests_and_replies_decode() -> None:
    request = msgspec.json.decode(
        b'{"model":"smollm2","messages":[{"role":"user","content":"hi"}]}', type=ModelRequest
    )
    assert (request.fallback, request.local_only) == ((), False)
    reply = msgspec.json.decode(
        b'{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}',
        type=ModelReply,
    )
    assert (reply.model, reply.fallbacks, reply.timing) == ("", (), Timing())


def test_a_fallback_event_round_trips() -> None:
    event = msgspec.json.decode(
        b'{"agent":"acme.bot","seq":3,"turn":1,"round":1,"at":"2026-11-30T00:00:00Z",'
        b'"body":{"type":"model_fallback","model":"vllm","next":"smollm2","reason":"Gone."}}',
        type=Event,
    )
    assert event.body == ModelFallback("vllm", "smollm2", "Gone.")
