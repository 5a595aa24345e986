"""Talking to agents through the gateway: one-shot sends, an interactive chat, reading
timelines, answering approvals, stopping."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import msgspec

from schemas.events import (
    ApprovalRequested,
    Event,
    MessageRejected,
    MessageSteered,
    TurnEnded,
    TurnParked,
    TurnStarted,
    Waiting,
)
from schemas.spec import AgentSpec, WhileBusy
from services.cli.errors import NotThereError, UsageError
from services.cli.gateway import tenant_of
from services.cli.render import describe
from services.client import Accepted, ApiError, Client
from services.specs import load_spec

EXAMPLE_SPEC = Path(__file__).resolve().parents[2] / "examples" / "assistant.toml"


def print_events(events: Iterable[Event]) -> None:
    for event in events:
        print(describe(event))


def published_kind(client: Client, spec: AgentSpec) -> str:
    """The spec's kind, published first unless its newest version is this very spec (the
    gateway sends by kind: a spec file becomes the newest version of its kind)."""
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


def watch(client: Client, address: str, sent: Accepted, text: str, *, show: bool) -> Event:
    """Follow the turn the message `sent` started until it ends or waits for someone; print
    its events with `show`. The event it stopped at. The turn is found by the message's id
    (two equal texts are two turns); by its text only from a gateway that gives no id."""
    turn: int | None = None
    for event in recorded(client, address, sent.after_seq):
        if turn is None and _starts(event, sent.message_id, text):
            turn = event.turn
        if show:
            print_events((event,))
        if _names(event, sent.message_id, MessageRejected):
            return event
        if event.turn == turn and _stops(event):
            return event
    raise AssertionError("a followed timeline never ends")


def _starts(event: Event, message_id: str, text: str) -> bool:
    """The turn the message started, or the running turn it joined (`steer`)."""
    if _names(event, message_id, MessageSteered):
        return True
    if not isinstance(event.body, TurnStarted):
        return False
    return event.body.message_id == message_id if message_id else event.body.text == text


def _names(event: Event, message_id: str, kind: type[MessageSteered | MessageRejected]) -> bool:
    body = event.body
    return bool(message_id) and isinstance(body, kind) and body.message_id == message_id


def _stops(event: Event) -> bool:
    return isinstance(event.body, TurnEnded | ApprovalRequested | TurnParked | Waiting)


def send(
    client: Client,
    address: str,
    text: str,
    *,
    spec: AgentSpec | None = None,
    kind: str | None = None,
    while_busy: WhileBusy | None = None,
    show: bool,
) -> int:
    """Send one message, follow its turn until it ends (or waits), print the reply. A
    `spec` is published as its kind's newest version first (unless it is already)."""
    kind = published_kind(client, spec) if spec is not None else kind
    try:
        sent = client.send(address, text, kind=kind, while_busy=while_busy)
    except ApiError as error:
        if error.status != HTTPStatus.NOT_FOUND:
            raise
        raise NotThereError(_unknown_kind(address, kind) if kind else _new(address)) from error
    last = watch(client, address, sent, text, show=show)
    return _outcome(address, last)


def _new(address: str) -> str:
    tenant = tenant_of(address)
    return (
        f"{address} does not exist yet: its first message names what it runs, with "
        f"--kind KIND (`teaspill specs list {tenant}` shows the published kinds) or "
        "--spec FILE (e.g. --spec examples/assistant.toml)."
    )


def _unknown_kind(address: str, kind: str) -> str:
    tenant = tenant_of(address)
    return (
        f"tenant {tenant} has published no kind {kind!r}: `teaspill specs publish {tenant} "
        f"FILE` publishes one, or send with --spec FILE; `teaspill specs list {tenant}` shows "
        "what is published."
    )


def require_agent(client: Client, address: str) -> None:
    """Say so in a sentence when the agent does not exist."""
    if not _exists(client, address):
        raise NotThereError(_missing(address))


def _missing(address: str) -> str:
    tenant = tenant_of(address)
    return (
        f"there is no agent {address}: `teaspill agents list {tenant}` shows the tenant's "
        f"agents, and `teaspill send {address} 'hello' --kind KIND` creates it."
    )


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
    if isinstance(body, MessageRejected):
        print(f"The message was rejected: {body.message}", file=sys.stderr)
        return 1
    assert isinstance(body, TurnEnded)
    if body.outcome == "succeeded":
        print(body.reply)
        return 0
    print(f"The turn ended {body.outcome}: {body.reason}", file=sys.stderr)
    return 1


def open_chat(client: Client, address: str, spec: AgentSpec | None) -> None:
    """Chat; a `spec` is the agent's from now on. Without one an existing agent keeps its
    own and a new agent gets the example spec, so a chat never changes a spec unasked."""
    if spec is None and not _exists(client, address):
        print(f"{address} is new: it runs {EXAMPLE_SPEC.name} (choose another with --spec).")
        spec = load_spec(EXAMPLE_SPEC)
    chat(client, address, spec)


def _exists(client: Client, address: str) -> bool:
    try:
        client.agent(address)
    except ApiError as error:
        if error.status != 404:
            raise
        return False
    return True


def chat(client: Client, address: str, spec: AgentSpec | None) -> None:
    """Read lines from the terminal and send each as a message, until end of input. A
    `spec` goes with the first message (the agent keeps it); None keeps the agent's own."""
    running = f"{spec.kind}, model {spec.model}" if spec else "its current spec"
    print(f"Talking to {address} ({running}). Ctrl-D to leave.")
    while True:
        try:
            text = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return
        if not text:
            continue
        send(client, address, text, spec=spec, show=True)
        spec = None


def tail(client: Client, address: str, after: int, *, follow: bool) -> None:
    """Print the timeline after `after`; with `follow`, keep printing until Ctrl-C."""
    require_agent(client, address)
    try:
        if follow:
            print_events(recorded(client, address, after))
        else:
            print_events(client.events(address, after=after))
    except KeyboardInterrupt:
        print()


def answers_of(text: str) -> dict[str, dict[str, Any]]:
    """`--answers` as given: a JSON object of objects, per question key."""
    if not text:
        return {}
    try:
        found = msgspec.json.decode(text)
    except msgspec.DecodeError:
        found = None
    if not isinstance(found, dict) or not all(isinstance(v, dict) for v in found.values()):
        raise UsageError(
            "--answers takes a JSON object with an object of values per question key, "
            'e.g. \'{"quantity": {"quantity": 3}}\'.'
        )
    return found


def approve(
    client: Client,
    address: str,
    request_id: str,
    *,
    deny: bool,
    note: str,
    answers: dict[str, dict[str, Any]] | None = None,
) -> int:
    """One-way: the gateway answers 202 once Restate holds the answer."""
    require_agent(client, address)
    try:
        if deny:
            client.deny(address, request_id, note)
        else:
            client.approve(address, request_id, note, answers)
    except ApiError as error:
        if error.status != HTTPStatus.NOT_FOUND:
            raise
        raise NotThereError(
            f"{address} asked no approval {request_id}: `teaspill tail {address}` shows the "
            "approvals it asked for (asks approval <id> ...)."
        ) from error
    verdict = "denial" if deny else "approval"
    print(f"Accepted: Restate holds your {verdict} of {request_id}. {_APPLIED.format(address)}")
    return 0


def hold(client: Client, address: str, *, resume: bool) -> int:
    """Pause or resume, one-way: the gateway answers 202 once Restate holds it."""
    require_agent(client, address)
    if resume:
        client.resume(address)
    else:
        client.pause(address)
    what = "resume" if resume else "pause"
    print(f"Accepted: Restate holds your {what}. {_APPLIED.format(address)}")
    return 0


def stop(client: Client, address: str) -> int:
    """One-way: the gateway answers 202 once Restate holds the stop."""
    require_agent(client, address)
    client.stop(address)
    print(f"Accepted: Restate holds your stop. {_APPLIED.format(address)}")
    return 0


_APPLIED = (
    "{0} applies it in its next wake, even if its service is restarting now; "
    "`teaspill tail {0}` shows the outcome."
)
