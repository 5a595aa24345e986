"""`teaspill`: run the stack, talk to agents, follow timelines, operate."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from schemas.spec import AgentSpec
from schemas.wake import Message
from services.cli import admin, health, stack, talk
from services.cli.errors import guarded
from services.ingress import Ingress
from services.keys import SCOPES
from services.offer import deployment_offer
from services.settings import Settings, load_settings
from services.specs import load_spec

EXAMPLE_AGENT = "local.assistant"

Run = Callable[[argparse.Namespace, Settings, Ingress], int | None]


def _stack_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = verbs.add_parser("up", help="start the stack and chat with the example agent")
    up.add_argument(
        "--spec",
        type=Path,
        help="spec file for the agent to chat with (default: its own, or "
        "examples/assistant.toml for a new agent)",
    )
    up.add_argument("--agent", default=EXAMPLE_AGENT, help="address of the agent to chat with")
    up.add_argument("--detach", action="store_true", help="leave the stack running and return")
    up.add_argument("--no-chat", action="store_true", help="serve until Ctrl-C, without a chat")
    verbs.add_parser("down", help="stop a stack started with `up --detach`")
    verbs.add_parser("status", help="say which parts of the stack answer")


def _talk_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = verbs.add_parser("send", help="send one message and print the reply")
    send.add_argument("address", help="agent address, e.g. acme.helper")
    send.add_argument("text", help="the message")
    first = send.add_mutually_exclusive_group()
    first.add_argument(
        "--spec", type=Path, help="spec file to run with (an agent's first message needs one)"
    )
    first.add_argument(
        "--kind", help="a published kind to run with (or --spec for an agent's first message)"
    )
    send.add_argument("--timeline", action="store_true", help="also print the turn's events")
    send.add_argument("--follow", action="store_true", help="print the turn live as it runs")
    send.set_defaults(run=_send)

    chat = verbs.add_parser("chat", help="talk to an agent interactively")
    chat.add_argument("address")
    chat.add_argument(
        "--spec",
        type=Path,
        help="spec file to run with from now on; without it an existing agent keeps its spec "
        "and a new one gets examples/assistant.toml",
    )
    chat.set_defaults(run=_chat)

    tail = verbs.add_parser("tail", help="print an agent's timeline, and follow it with -f")
    tail.add_argument("address")
    tail.add_argument("--after", type=int, default=0, help="start after this seq")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.set_defaults(run=lambda a, s, i: talk.tail(i, a.address, a.after, follow=a.follow))

    approve = verbs.add_parser(
        "approve",
        help="answer an approval request",
        description="Answer an approval request, one-way: Restate holds the answer durably "
        "and the agent applies it in its next wake, even while its service restarts. "
        "`teaspill tail` shows approval_answered, or approval_refused and why.",
    )
    approve.add_argument("address")
    approve.add_argument("request_id", help="from the approval_requested event")
    approve.add_argument("--deny", action="store_true", help="deny instead of approving")
    approve.add_argument("--note", default="", help="a note the model will read")
    approve.set_defaults(
        run=lambda a, s, i: talk.approve(i, a.address, a.request_id, deny=a.deny, note=a.note)
    )

    stop = verbs.add_parser(
        "stop",
        help="stop the agent's turn in progress",
        description="Stop the agent's turn in progress, one-way: Restate holds the stop "
        "durably; a running turn ends `stopped` within seconds of its service running. "
        "`teaspill tail` shows the ending, or stop_refused when no turn was in progress.",
    )
    stop.add_argument("address")
    stop.set_defaults(run=lambda a, s, i: talk.stop(i, a.address))


def _admin_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = verbs.add_parser("keys", help="API keys").add_subparsers(required=True, metavar="VERB")
    create = keys.add_parser("create", help="make a key; it is shown once")
    create.add_argument("tenant")
    create.add_argument(
        "--scope", choices=SCOPES, default="read", help="what the key may do (default: read)"
    )
    create.set_defaults(run=lambda a, s, i: admin.keys_create(i, a.tenant, a.scope))
    listing = keys.add_parser("list", help="a tenant's keys")
    listing.add_argument("tenant")
    listing.set_defaults(run=lambda a, s, i: admin.keys_list(i, a.tenant))
    revoke = keys.add_parser("revoke", help="revoke a key for good")
    revoke.add_argument("tenant")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=lambda a, s, i: admin.keys_revoke(i, a.tenant, a.key_id))

    specs = verbs.add_parser("specs", help="agent specs").add_subparsers(
        required=True, metavar="VERB"
    )
    publish = specs.add_parser("publish", help="publish a spec file as a new version")
    publish.add_argument("tenant")
    publish.add_argument("file", type=Path)
    publish.set_defaults(run=lambda a, s, i: admin.specs_publish(i, a.tenant, spec_file(a.file, s)))
    slist = specs.add_parser("list", help="a tenant's published specs")
    slist.add_argument("tenant")
    slist.set_defaults(run=lambda a, s, i: admin.specs_list(i, a.tenant))

    agents = verbs.add_parser("agents", help="the agent catalog").add_subparsers(
        required=True, metavar="VERB"
    )
    alist = agents.add_parser("list", help="a tenant's agents")
    alist.add_argument("tenant")
    alist.add_argument("--kind")
    alist.add_argument("--status", choices=("idle", "running", "waiting", "parked"))
    alist.set_defaults(run=lambda a, s, i: admin.agents_list(s, a.tenant, a.kind, a.status))
    show = agents.add_parser("show", help="one agent's status")
    show.add_argument("address")
    show.set_defaults(run=lambda a, s, i: print(_status_text(i, a.address)))

    projections = verbs.add_parser("projections", help="the SQLite projections")
    rebuild = projections.add_subparsers(required=True, metavar="VERB").add_parser(
        "rebuild", help="rebuild them from the agents' timelines"
    )
    rebuild.set_defaults(run=lambda a, s, i: admin.projections_rebuild(i))


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="teaspill", description=__doc__)
    verbs = cli.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _stack_commands(verbs)
    _talk_commands(verbs)
    _admin_commands(verbs)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments (argparse answers a bad one with usage and exit 2), then run the
    command inside the one error boundary."""
    args = parser().parse_args(argv)
    return guarded(lambda: _run(args, load_settings()))


def _run(args: argparse.Namespace, settings: Settings) -> int:
    match args.command:
        case "up":
            return stack.up(settings, spec_file(args.spec, settings) if args.spec else None, args)
        case "down":
            return stack.down(settings)
        case "status":
            return health.status(settings)
    ingress = Ingress(settings.ingress_url)
    try:
        run: Run = args.run
        return run(args, settings, ingress) or 0
    finally:
        ingress.close()


def _send(args: argparse.Namespace, settings: Settings, ingress: Ingress) -> int:
    spec = spec_file(args.spec, settings) if args.spec else None
    message = Message(args.text, spec=spec, kind=args.kind)
    if args.follow:
        return talk.send_following(ingress, args.address, message)
    return talk.send(ingress, args.address, message, show=args.timeline)


def _chat(args: argparse.Namespace, settings: Settings, ingress: Ingress) -> int:
    talk.open_chat(ingress, args.address, spec_file(args.spec, settings) if args.spec else None)
    return 0


def spec_file(path: Path, settings: Settings) -> AgentSpec:
    """A spec file, checked as a publish is: models and tools this deployment has."""
    return load_spec(path, deployment_offer(settings))


def _status_text(ingress: Ingress, address: str) -> str:
    status = ingress.status(address)
    return (
        f"{status.address}: {status.state}, turn {status.turn}, last seq {status.last_seq}, "
        f"last outcome {status.last_outcome or '-'}, {status.queued} queued, "
        f"{status.tokens_used} tokens on {status.tokens_day or '-'}"
    )


if __name__ == "__main__":
    sys.exit(main())
