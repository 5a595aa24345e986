"""Reading a benchmark agent's timeline back, checking it, and timing its rounds from it.

A run only counts if every timeline is whole: seq 1..n with nothing missing or repeated,
and every turn shaped as the script says (one model message, tool call and tool result per
calculator round, then the reply).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bench import BenchError
from schemas.events import Event, ModelMessage, ToolCalled, ToolFinished, TurnEnded, TurnStarted
from services.ingress import Ingress

PAGE = 500


def read_timeline(ingress: Ingress, address: str) -> list[Event]:
    events: list[Event] = []
    while True:
        after = events[-1].seq if events else 0
        page = ingress.timeline(address, after_seq=after, limit=PAGE)
        events.extend(page.events)
        if not page.events or events[-1].seq >= page.last_seq:
            if len(events) != page.last_seq:
                raise BenchError(
                    f"{address}: read {len(events)} events but its last seq is {page.last_seq}."
                )
            return events


def check_timeline(address: str, events: list[Event], turns: int, rounds: int) -> None:
    """Raise `BenchError` unless the timeline holds `turns` whole turns of `rounds` rounds."""
    seqs = [event.seq for event in events]
    if seqs != list(range(1, len(events) + 1)):
        raise BenchError(f"{address}: the timeline is not contiguous: seq {_gaps(seqs)}.")
    expected = turns * events_per_turn(rounds)
    if len(events) != expected:
        raise BenchError(f"{address}: {len(events)} events, expected {expected}.")
    for number, turn in enumerate(_by_turn(events, rounds), start=1):
        _check_turn(address, number, turn, rounds)


def events_per_turn(rounds: int) -> int:
    """TurnStarted, three events per calculator round, then the reply and TurnEnded."""
    return 1 + 3 * (rounds - 1) + 2


def expected_result(turn: int, round_: int) -> str:
    return str(turn * round_)


def _by_turn(events: list[Event], rounds: int) -> Iterator[list[Event]]:
    size = events_per_turn(rounds)
    for start in range(0, len(events), size):
        yield events[start : start + size]


def _check_turn(address: str, number: int, turn: list[Event], rounds: int) -> None:
    where = f"{address} turn {number}"
    if any(event.turn != number for event in turn):
        raise BenchError(f"{where}: events of another turn are mixed in.")
    shape = [type(event.body) for event in turn]
    wanted = [TurnStarted, *[ModelMessage, ToolCalled, ToolFinished] * (rounds - 1)]
    if shape != [*wanted, ModelMessage, TurnEnded]:
        raise BenchError(f"{where}: unexpected events {[t.__name__ for t in shape]}.")
    ended = turn[-1].body
    if not isinstance(ended, TurnEnded) or ended.outcome != "succeeded":
        raise BenchError(f"{where}: the turn did not succeed: {ended!r}.")
    results = [e.body for e in turn if isinstance(e.body, ToolFinished)]
    for round_, result in enumerate(results, start=1):
        if (result.status, result.content) != ("ok", expected_result(number, round_)):
            raise BenchError(f"{where} round {round_}: calculator answered {result!r}.")


def _gaps(seqs: list[int]) -> str:
    for expected, (index, seq) in enumerate(enumerate(seqs), start=1):
        if seq != expected:
            return f"{seq} at position {index + 1} where {expected} was due"
    return "ok"


@dataclass(frozen=True)
class RoundGaps:
    """Milliseconds between the timestamps of one calculator round's events.

    Each timestamp is taken (a journaled `ctx.time()` step) when the event is appended.
    """

    append_ms: float
    """ModelMessage to ToolCalled: one append and the harness in between."""
    tool_ms: float
    """ToolCalled to ToolFinished: the tool step and one append."""
    model_ms: float
    """ToolFinished to the next ModelMessage: the Model service call and one append."""


def round_gaps(events: list[Event]) -> list[RoundGaps]:
    gaps = []
    for a, b, c, d in _windows(events):
        if (type(a.body), type(b.body), type(c.body), type(d.body)) == (
            ModelMessage,
            ToolCalled,
            ToolFinished,
            ModelMessage,
        ):
            gaps.append(RoundGaps(_ms(a, b), _ms(b, c), _ms(c, d)))
    return gaps


def turn_span_ms(turn: list[Event]) -> float:
    """TurnStarted to TurnEnded, as the agent recorded them."""
    return _ms(turn[0], turn[-1])


def turns_of(events: list[Event], rounds: int) -> list[list[Event]]:
    return list(_by_turn(events, rounds))


def _windows(events: list[Event]) -> Iterator[tuple[Event, Event, Event, Event]]:
    return zip(events, events[1:], events[2:], events[3:], strict=False)


def _ms(earlier: Event, later: Event) -> float:
    return (later.at - earlier.at).total_seconds() * 1000.0
