"""Talking to agents through the gateway: one-shot sends, an interactive chat, reading
timelines, answering approvals, stopping."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

import msgspec

from schemas.events import ApprovalRequested, Event, TurnEnded, TurnParked, TurnStarted, Waiting
from schemas.spec import AgentSpec
from services.cli.render import describe
from services.client import Client


def print_events(events: Iterable[Event]) -> None:
    for event in events:
        print(describe(event))


def published_kind(client: Client, spec: AgentSpec) -> str:
    """The spec's kind, published first unless its newest version is this very spec."""
    versions = client.specs(spec.kind)
    newest = versions[-1].spec if versions else None
    if newest is None or msgspec.structs.replace(newest, version=0) != spec:
        client.publish(spec)
    return spec.kind


def recorded(client: Client, address: str, after: int) -> Iterator[Event]:
    """The timeline after `after`, then live; recorded events only."""
    for item in client.follow(address, after=after):
        if isinstance(item, Event):
            yield item


def watch(client: Client, address: str, after: int, text: str | None, *, show: bool) -> Event:
    """Follow the turn that carries `text` (or the next turn's events) until it ends or waits
    for someone; print its events with `show`. The event it stopped at."""
    turn: int | None = None
    for event in recorded(client, address, after):
        if turn is None and (text is None or _starts(event, text)):
            turn = event.turn
        if show:
            print_events((event,))
        if event.turn == turn and _stops(event):
            return event
    raise AssertionError("a followed timeline never ends")


def _starts(event: Event, text: str) -> bool:
    return isinstance(event.body, TurnStarted) and event.body.text == text


def _stops(event: Event) -> bool:
    return isinstance(event.body, TurnEnded | ApprovalRequested | TurnParked | Waiting)


def send(client: Client, address: str, text: str, spec: AgentSpec | None, *, show: bool) -> int:
    """Send one message, follow its turn until it ends (or waits), print the reply."""
    kind = published_kind(client, spec) if spec is not None else None
    sent = client.send(address, text, kind=kind)
    last = watch(client, address, sent.after_seq, text, show=show)
    return _outcome(address, last)


def _outcome(address: str, last: Event) -> int:
    body = last.body
    if isinstance(body, ApprovalRequested | TurnParked):
        print(
            f"The turn waits for approval {body.request_id}: "
            f"`teaspill approve {address} {body.request_id}` (or --deny)."
        )
        return 0
    if isinstance(body, Waiting):
        print(f"The turn waits for its helpers; follow it with `teaspill tail -f {address}`.")
        return 0
    assert isinstance(body, TurnEnded)
    if body.outcome == "succeeded":
        print(body.reply)
        return 0
    print(f"The turn ended {body.outcome}: {body.reason}", file=sys.stderr)
    return 1


def chat(client: Client, address: str, spec: AgentSpec) -> None:
    """Read lines from the terminal and send each as a message, until end of input."""
    print(f"Talking to {address} ({spec.kind}, model {spec.model}). Ctrl-D to leave.")
    while True:
        try:
            text = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return
        if text:
            send(client, address, text, spec, show=True)


def tail(client: Client, address: str, after: int, *, follow: bool) -> None:
    """Print the timeline after `after`; with `follow`, keep printing until Ctrl-C."""
    try:
        if follow:
            print_events(recorded(client, address, after))
        else:
            print_events(client.events(address, after=after))
    except KeyboardInterrupt:
        print()


def send_following(client: Client, address: str, text: str, spec: AgentSpec | None) -> int:
    """Send one-way and print the turn live as it happens."""
    return send(client, address, text, spec, show=True)


def approve(client: Client, address: str, request_id: str, *, deny: bool, note: str) -> int:
    """Answer, then follow the turn until it ends or waits again; print what it did."""
    before = client.agent(address).last_seq
    answer = client.deny if deny else client.approve
    answer(address, request_id, note)
    print(f"{'Denied' if deny else 'Approved'} {request_id}.")
    return _outcome(address, watch(client, address, before, None, show=False))


def stop(client: Client, address: str) -> int:
    print(client.stop(address).message)
    return 0
