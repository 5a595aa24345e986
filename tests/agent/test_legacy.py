"""State written before the agent record decodes into one: payloads as the old layout
stored them, byte for byte."""

from __future__ import annotations

from schemas.harness import AwaitingApproval, AwaitingChildren, Running
from schemas.state import AgentRecord, Ledger
from services.agent.legacy import record_from

SPEC = b'{"kind":"helper","instructions":"Be brief.","model":"script","version":2}'
CALL = b'{"id":"call_0","name":"ledger","arguments":{"entry":"a"}}'
USER = b'{"role":"user","content":"do it"}'


def old_turn(flags: bytes) -> bytes:
    return b'{"number":3,"spec":' + SPEC + b',"messages":[' + USER + b'],"round":1' + flags + b"}"


def test_no_old_keys_is_no_record() -> None:
    assert record_from({}) is None


def test_a_summary_spec_queue_answered_and_ledger_carry_over() -> None:
    record = record_from(
        {
            "summary": b'{"turns":3,"last_outcome":"failed","last_reply":""}',
            "spec": SPEC,
            "queue": b'{"messages":[{"type":"message","text":"next"}]}',
            "answered": b'{"requests":["t1r1-call_0"]}',
            "ledger": b'{"day":"2026-11-29","day_tokens":120,"reserved":0}',
        }
    )
    assert record is not None
    assert (record.turns, record.last_outcome, record.turn) == (3, "failed", None)
    assert record.spec is not None
    assert record.spec.version == 2
    assert [m.text for m in record.queue] == ["next"]
    assert record.answered == ("t1r1-call_0",)
    assert record.ledger == Ledger("2026-11-29", 120, 0)


def test_a_turn_waiting_for_an_answer_keeps_its_call_and_the_rest_of_its_round() -> None:
    flags = (
        b',"approval":{"request_id":"t3r1-call_0","call":' + CALL + b'},"remaining":['
        + CALL + b'],"parked":true'
    )  # fmt: skip
    record = record_from({"turn": old_turn(flags), "summary": b'{"turns":3}'})
    assert record is not None
    assert record.turn is not None
    phase = record.turn.phase
    assert isinstance(phase, AwaitingApproval)
    assert phase.approval.request_id == "t3r1-call_0"
    assert phase.parked
    assert [c.name for c in phase.remaining] == ["ledger"]


def test_a_turn_waiting_for_children_still_waits() -> None:
    flags = b',"waiting":true,"pending":[{"address":"acme.bot.t3r1c0","call_id":"call_0"}]'
    record = record_from({"turn": old_turn(flags)})
    assert record is not None
    assert record.turn is not None
    assert record.turn.phase == AwaitingChildren()
    assert [p.address for p in record.turn.pending] == ["acme.bot.t3r1c0"]


def test_a_running_turn_is_running() -> None:
    record = record_from({"turn": old_turn(b"")})
    assert record is not None
    assert record.turn is not None
    assert record.turn.phase == Running()
    assert record == AgentRecord(turn=record.turn)
