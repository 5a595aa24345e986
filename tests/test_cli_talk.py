"""`teaspill send` prints the reply of the turn its own message started, found by the
message's id: another sender's equal text queued on the same agent is another turn."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import cast

import pytest

from schemas.events import Event, EventBody, MessageRejected, MessageSteered, TurnEnded, TurnStarted
from services.cli.talk import _outcome, watch
from services.client import Accepted, Client

ADDRESS = "acme.helper"


def event(seq: int, turn: int, body: EventBody) -> Event:
    return Event(ADDRESS, seq, turn, 0, datetime(2026, 1, 2, tzinfo=UTC), body)


class Timeline:
    """What the gateway's follow stream would send after `after`: the client's one call
    that `watch` uses."""

    def __init__(self, *events: Event) -> None:
        self.events = events

    def follow(self, address: str, *, after: int) -> Iterator[Event]:
        return (e for e in self.events if e.seq > after)


TWO_EQUAL_MESSAGES = Timeline(
    event(4, 2, TurnStarted("hello", "assistant", 1, message_id="someone-else")),
    event(5, 2, TurnEnded("succeeded", reply="not yours")),
    event(6, 3, TurnStarted("hello", "assistant", 1, message_id="mine")),
    event(7, 3, TurnEnded("succeeded", reply="yours")),
)


def test_the_turn_is_the_one_the_message_id_names() -> None:
    sent = Accepted(ADDRESS, after_seq=3, events_url="", message_id="mine")
    last = watch(cast(Client, TWO_EQUAL_MESSAGES), ADDRESS, sent, "hello", show=False)
    assert last.body == TurnEnded("succeeded", reply="yours")


def test_without_an_id_the_turn_is_found_by_its_text() -> None:
    sent = Accepted(ADDRESS, after_seq=3, events_url="")
    last = watch(cast(Client, TWO_EQUAL_MESSAGES), ADDRESS, sent, "hello", show=False)
    assert last.body == TurnEnded("succeeded", reply="not yours")


def test_a_steered_message_is_followed_in_the_turn_it_joined() -> None:
    joined = Timeline(
        event(4, 2, TurnStarted("long job", "assistant", 1, message_id="first")),
        event(5, 2, MessageSteered("and also", "mine")),
        event(6, 2, TurnEnded("succeeded", reply="did both")),
    )
    sent = Accepted(ADDRESS, after_seq=3, events_url="", message_id="mine")
    last = watch(cast(Client, joined), ADDRESS, sent, "and also", show=False)
    assert last.body == TurnEnded("succeeded", reply="did both")


def test_a_rejected_message_ends_the_watch_with_its_sentence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    refused = Timeline(event(4, 2, MessageRejected("later", "mine", "A turn was in progress.")))
    sent = Accepted(ADDRESS, after_seq=3, events_url="", message_id="mine")
    last = watch(cast(Client, refused), ADDRESS, sent, "later", show=False)
    assert _outcome(ADDRESS, last) == 1
    assert "rejected: A turn was in progress." in capsys.readouterr().err
