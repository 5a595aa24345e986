"""The client's sans-IO follower: frames parsed, items decoded, each recorded event once and
each round's live text contiguous across reconnects."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.events import Event, ModelMessage, TurnStarted
from schemas.live import LiveDelta, Retraction
from services.client.stream import Cursor, Frame, FrameParser, decode

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def event(seq: int, round_: int = 1, text: str = "") -> Event:
    body = ModelMessage("m", text) if text else TurnStarted("hi", "helper", 1)
    return Event("acme.a", seq, 1, round_, T0, body)


def test_frames_are_parsed_from_lines_and_keepalives_dropped() -> None:
    parser = FrameParser()
    lines = [": keepalive", "", "id: 3", "event: turn_started", "data: {", "data: }", ""]
    frames = [f for f in map(parser.line, lines) if f is not None]
    assert frames == [Frame("turn_started", "{\n}", "3")]


def test_a_frame_decodes_to_a_typed_item() -> None:
    delta = LiveDelta("acme.a", 1, 1, "x", 0, "It")
    import msgspec  # noqa: PLC0415

    assert decode(Frame("delta", msgspec.json.encode(delta).decode())) == delta
    assert decode(Frame("retract", '{"agent":"acme.a","turn":1,"round":1}')) == Retraction(
        "acme.a", 1, 1
    )
    assert decode(Frame("turn_started", msgspec.json.encode(event(1)).decode(), "1")) == event(1)
    assert decode(Frame("something_new", "{}")) is None


def test_a_repeated_event_is_dropped() -> None:
    cursor = Cursor()
    assert cursor.admit(event(1)) == [event(1)]
    assert cursor.admit(event(1)) == []
    assert cursor.last_event_id == "1"


def test_live_text_repeated_after_a_reconnect_is_trimmed() -> None:
    cursor = Cursor()
    assert cursor.admit(LiveDelta("acme.a", 1, 1, "x", 0, "It ")) == [
        LiveDelta("acme.a", 1, 1, "x", 0, "It ")
    ]
    # A reconnect sends the round's text so far as one delta from offset 0.
    assert cursor.admit(LiveDelta("acme.a", 1, 1, "x", 0, "It is")) == [
        LiveDelta("acme.a", 1, 1, "x", 3, "is")
    ]
    assert cursor.admit(LiveDelta("acme.a", 1, 1, "x", 9, "gap")) == []


def test_a_new_attempt_is_retracted_before_its_text() -> None:
    cursor = Cursor()
    cursor.admit(LiveDelta("acme.a", 1, 1, "x", 0, "Wrong"))
    assert cursor.admit(LiveDelta("acme.a", 1, 1, "y", 0, "Right")) == [
        Retraction("acme.a", 1, 1),
        LiveDelta("acme.a", 1, 1, "y", 0, "Right"),
    ]


def test_the_recorded_message_ends_the_round_live_text() -> None:
    cursor = Cursor()
    cursor.admit(LiveDelta("acme.a", 1, 1, "x", 0, "It"))
    cursor.admit(event(2, 1, "It is"))
    assert cursor.admit(LiveDelta("acme.a", 1, 1, "x", 2, " is")) == []
    assert cursor.admit(Retraction("acme.a", 1, 1)) == []
