"""Talking to agents: one-shot sends, an interactive chat, reading timelines."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from schemas.events import Event, TurnEnded
from schemas.spec import AgentSpec
from schemas.wake import Approval, Message, answer_key
from services.cli.render import describe
from services.contracts import APPROVALS, Empty
from services.ingress import Ingress
from services.specs import load_spec

EXAMPLE_SPEC = Path(__file__).resolve().parents[2] / "examples" / "assistant.toml"


def print_events(events: Iterable[Event]) -> None:
    for event in events:
        print(describe(event))


def send(ingress: Ingress, address: str, message: Message, *, show: bool) -> int:
    """Send one message, wait for the wake to end, print the reply (and the turn's events)."""
    before = ingress.status(address).last_seq
    result = ingress.wake(address, message)
    if show:
        print_events(ingress.timeline(address, after_seq=before, limit=500).events)
    if result.status.state in ("waiting", "parked"):
        print(_waiting(ingress, address))
    elif result.reply:
        print(result.reply)
    else:
        return _explain_failure(ingress, address, before)
    return 0


def _waiting(ingress: Ingress, address: str) -> str:
    pending = ingress.call(APPROVALS, Empty(), address)
    if pending.pending:
        return (
            f"The turn waits for approval {pending.pending}: "
            f"`teaspill approve {address} {pending.pending}` (or --deny)."
        )
    return f"The turn waits for its helpers; follow it with `teaspill tail -f {address}`."


def _explain_failure(ingress: Ingress, address: str, before: int) -> int:
    events = ingress.timeline(address, after_seq=before, limit=500).events
    endings = [e.body for e in events if isinstance(e.body, TurnEnded)]
    reason = endings[-1].reason if endings else "the turn did not end"
    print(f"The turn failed: {reason}", file=sys.stderr)
    return 1


def open_chat(ingress: Ingress, address: str, spec: AgentSpec | None) -> None:
    """Chat; a `spec` is the agent's from now on. Without one an existing agent keeps its
    own and a new agent gets the example spec, so a chat never changes a spec unasked."""
    if spec is None and ingress.status(address).turn == 0:
        print(f"{address} is new: it runs {EXAMPLE_SPEC.name} (choose another with --spec).")
        spec = load_spec(EXAMPLE_SPEC)
    chat(ingress, address, spec)


def chat(ingress: Ingress, address: str, spec: AgentSpec | None) -> None:
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
        send(ingress, address, Message(text, spec=spec), show=True)
        spec = None


def events_after(
    ingress: Ingress, address: str, after: int, *, follow: bool, poll: float = 0.2
) -> Iterator[Event]:
    """The timeline after `after`; with `follow`, then what lands, for as long as asked."""
    while True:
        page = ingress.timeline(address, after_seq=after, limit=500)
        yield from page.events
        if page.events:
            after = page.events[-1].seq
        elif not follow:
            return
        else:
            time.sleep(poll)


def tail(ingress: Ingress, address: str, after: int, *, follow: bool) -> None:
    """Print the timeline after `after`; with `follow`, keep printing until Ctrl-C."""
    try:
        print_events(events_after(ingress, address, after, follow=follow))
    except KeyboardInterrupt:
        print()


def follow_turn(ingress: Ingress, address: str, after: int) -> TurnEnded:
    """Print events as they land until a turn ends; return its ending."""
    for event in events_after(ingress, address, after, follow=True):
        print_events((event,))
        if isinstance(event.body, TurnEnded):
            return event.body
    raise AssertionError("a followed timeline never ends")


def send_following(ingress: Ingress, address: str, message: Message) -> int:
    """Send one-way and print the turn live as it happens."""
    before = ingress.status(address).last_seq
    ingress.send_wake(address, message)
    ended = follow_turn(ingress, address, before)
    if ended.outcome == "succeeded":
        print(ended.reply)
        return 0
    print(f"The turn ended {ended.outcome}: {ended.reason}", file=sys.stderr)
    return 1


def approve(ingress: Ingress, address: str, request_id: str, *, deny: bool, note: str) -> int:
    answer = Approval(request_id, approve=not deny, note=note, by="cli")
    ingress.send_wake(address, answer, answer_key(answer))
    verdict = "denial" if deny else "approval"
    print(f"Accepted: Restate holds your {verdict} of {request_id}. {_APPLIED.format(address)}")
    return 0


def stop(ingress: Ingress, address: str) -> int:
    ingress.send_stop(address)
    print(f"Accepted: Restate holds your stop. {_APPLIED.format(address)}")
    return 0


_APPLIED = (
    "{0} applies it in its next wake, even if its service is restarting now; "
    "`teaspill tail {0}` shows the outcome."
)
