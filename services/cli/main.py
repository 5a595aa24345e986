"""`teaspill`: run the stack, talk to agents, follow timelines, operate."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from schemas.tenant import Scope
from services.cli import (
    admin,
    endusers,
    evals,
    health,
    hooks,
    knowledge,
    lifecycle,
    schedules,
    stack,
    talk,
)
from services.cli.errors import guarded
from services.cli.gateway import Doors, spec_file, tenant_of
from services.cli.home import exports, located
from services.keys import SCOPES
from services.settings import Settings, load_settings
from services.specs import load_spec

EXAMPLE_AGENT = "local.assistant"

Run = Callable[[argparse.Namespace, Settings, Doors], int | None]


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
    up.add_argument(
        "--cluster",
        action="store_true",
        help="start the cluster layout on this machine: three Restate nodes, two endpoint "
        "replicas and two gateways behind HAProxy, PostgreSQL as their read side "
        "(docs/operations.md)",
    )
    verbs.add_parser("down", help="stop a stack started with `up --detach`")
    verbs.add_parser("status", help="say which parts of the stack answer")
    verbs.add_parser(
        "env",
        help="print shell lines with the stack's addresses",
        description="Print `export` lines naming this home and where its stack listens "
        "(TEASPILL_GATEWAY_URL, TEASPILL_INGRESS_URL, TEASPILL_ADMIN_URL), as `teaspill up` "
        'recorded them: `eval "$(teaspill env)"` gives a shell the addresses the docs\' '
        "examples use.",
    )


def _talk_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = verbs.add_parser("send", help="send one message and print the reply")
    send.add_argument("address", help="agent address, e.g. acme.helper")
    send.add_argument("text", help="the message")
    first = send.add_mutually_exclusive_group()
    first.add_argument(
        "--spec",
        type=Path,
        help="spec file to run with, published as its kind's newest version unless it is "
        "already (an agent's first message needs it or --kind)",
    )
    first.add_argument(
        "--kind", help="a published kind to run with (or --spec for an agent's first message)"
    )
    send.add_argument(
        "--while-busy",
        choices=("queue", "interrupt", "steer", "reject"),
        help="if a turn is in progress: run after it (queue), stop it and run this one "
        "(interrupt), join it at its next round (steer) or refuse (reject); default: "
        "the spec's while_busy, queue unless it says otherwise",
    )
    send.add_argument("--timeline", action="store_true", help="also print the turn's events")
    send.add_argument("--follow", action="store_true", help="print the turn live as it runs")
    send.set_defaults(run=_send)

    chat = verbs.add_parser("chat", help="talk to an agent interactively")
    chat.add_argument("address")
    chat.add_argument(
        "--spec",
        type=Path,
        help="spec file to run with from now on (published as its kind's newest version "
        "unless it is already); without it an existing agent keeps its spec and a new one "
        "gets examples/assistant.toml",
    )
    chat.set_defaults(run=_chat)

    tail = verbs.add_parser("tail", help="print an agent's timeline, and follow it with -f")
    tail.add_argument("address")
    tail.add_argument("--after", type=int, default=0, help="start after this seq")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.set_defaults(
        run=lambda a, s, d: talk.tail(d.agent(a.address), a.address, a.after, follow=a.follow)
    )

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
    approve.add_argument(
        "--answers",
        default="",
        help="for a call that asks for input: a JSON object, per question key the form's "
        'values, e.g. \'{"quantity": {"quantity": 3}}\'',
    )
    approve.set_defaults(run=_approve)

    stop = verbs.add_parser(
        "stop",
        help="stop the agent's turn in progress",
        description="Stop the agent's turn in progress, one-way: Restate holds the stop "
        "durably; a running turn ends `stopped` within seconds of its service running. "
        "`teaspill tail` shows the ending, or stop_refused when no turn was in progress.",
    )
    stop.add_argument("address")
    stop.set_defaults(run=lambda a, s, d: talk.stop(d.agent(a.address), a.address))
    for verb, resume in (("pause", False), ("resume", True)):
        _hold_command(verbs, verb, resume=resume)


def _hold_command(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], verb: str, *, resume: bool
) -> None:
    described = (
        "Resume a paused agent, one-way: its held turn goes on, then what arrived while it "
        "was paused runs, in order. `teaspill tail` shows agent_resumed."
        if resume
        else "Pause the agent, one-way: a running turn finishes its round and holds; "
        "nothing runs until `teaspill resume`, and what arrives meanwhile (messages, "
        "schedule fires, children's reports) is kept in order. `teaspill tail` shows "
        "agent_paused."
    )
    helped = "run a paused agent again" if resume else "hold the agent after its round"
    command = verbs.add_parser(verb, help=helped, description=described)
    command.add_argument("address")
    command.set_defaults(
        run=lambda a, s, d: talk.hold(d.agent(a.address), a.address, resume=resume)
    )


def _keys_create(args: argparse.Namespace, _settings: Settings, doors: Doors) -> None:
    scope: Scope = "publishable" if args.publishable else args.scope
    origins, kinds = tuple(args.origin), tuple(args.kind)
    admin.keys_create(doors.ingress, args.tenant, scope, args.name, origins=origins, kinds=kinds)


def _admin_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = verbs.add_parser("keys", help="API keys").add_subparsers(required=True, metavar="VERB")
    create = keys.add_parser("create", help="make a key; it is shown once")
    create.add_argument("tenant")
    create.add_argument(
        "--scope", choices=SCOPES, default="read", help="what the key may do (default: read)"
    )
    create.add_argument(
        "--name", default="", help="what the key is for, e.g. alice or ci; approvals show it"
    )
    create.add_argument(
        "--publishable",
        action="store_true",
        help="a key for a page, safe in its HTML: valid from --origin, for --kind, with an "
        "end-user token (instead of --scope)",
    )
    create.add_argument(
        "--origin",
        action="append",
        default=[],
        help="a page origin the publishable key is valid from, e.g. https://app.example.com "
        "(repeat for more)",
    )
    create.add_argument(
        "--kind",
        action="append",
        default=[],
        help="a published kind the publishable key's end users may talk to (repeat for more)",
    )
    create.set_defaults(run=_keys_create)
    listing = keys.add_parser("list", help="a tenant's keys")
    listing.add_argument("tenant")
    listing.set_defaults(run=lambda a, s, d: admin.keys_list(d.tenant(a.tenant), a.tenant))
    revoke = keys.add_parser("revoke", help="revoke a key for good")
    revoke.add_argument("tenant")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=lambda a, s, d: admin.keys_revoke(d.tenant(a.tenant), a.key_id))

    specs = verbs.add_parser("specs", help="agent specs").add_subparsers(
        required=True, metavar="VERB"
    )
    publish = specs.add_parser("publish", help="publish a spec file as a new version")
    publish.add_argument("tenant")
    publish.add_argument("file", type=Path)
    publish.set_defaults(run=_publish)
    slist = specs.add_parser("list", help="a tenant's published specs")
    slist.add_argument("tenant")
    slist.set_defaults(run=lambda a, s, d: admin.specs_list(d.tenant(a.tenant), a.tenant))

    agents = verbs.add_parser("agents", help="the agent catalog").add_subparsers(
        required=True, metavar="VERB"
    )
    alist = agents.add_parser("list", help="a tenant's agents")
    alist.add_argument("tenant")
    alist.add_argument("--kind")
    alist.add_argument("--status", choices=("idle", "running", "waiting", "parked"))
    alist.set_defaults(
        run=lambda a, s, d: admin.agents_list(d.tenant(a.tenant), a.tenant, a.kind, a.status)
    )
    show = agents.add_parser("show", help="one agent's status")
    show.add_argument("address")
    show.set_defaults(run=lambda a, s, d: _show(d, a.address))
    lifecycle.agent_commands(agents)

    offered = verbs.add_parser(
        "deployment",
        help="what the running deployment offers a tenant",
        description="Ask the running deployment which models and tools a spec may name and "
        "which kinds the tenant has published (the names `specs publish` is checked against).",
    )
    offered.add_argument("tenant")
    offered.set_defaults(run=lambda a, s, d: admin.deployment(d.tenant(a.tenant), a.tenant))

    projections = verbs.add_parser(
        "projections",
        help="the read side (SQLite or PostgreSQL): timelines, catalog, search indexes",
    )
    rebuild = projections.add_subparsers(required=True, metavar="VERB").add_parser(
        "rebuild", help="rebuild them from the agents' timelines"
    )
    rebuild.set_defaults(run=lambda a, s, d: admin.projections_rebuild(d.ingress))


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="teaspill", description=__doc__)
    verbs = cli.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _stack_commands(verbs)
    _talk_commands(verbs)
    schedules.commands(verbs)
    hooks.commands(verbs)
    knowledge.commands(verbs)
    evals.commands(verbs)
    lifecycle.commands(verbs)
    _admin_commands(verbs)
    endusers.commands(verbs)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments (argparse answers a bad one with usage and exit 2), then run the
    command inside the one error boundary."""
    args = parser().parse_args(argv)
    return guarded(lambda: _run(args, located(load_settings())))


def _run(args: argparse.Namespace, settings: Settings) -> int:
    match args.command:
        case "up":
            return stack.up(settings, load_spec(args.spec) if args.spec else None, args)
        case "down":
            return stack.down(settings)
        case "status":
            return health.status(settings)
        case "env":
            if stack.recorded(settings) is None:
                print(
                    f"# No stack of {settings.home} runs: these are where `teaspill up` starts one."
                )
            print("\n".join(exports(settings)))
            return 0
    doors = Doors(settings)
    try:
        run: Run = args.run
        return run(args, settings, doors) or 0
    finally:
        doors.close()


def _send(args: argparse.Namespace, settings: Settings, doors: Doors) -> int:
    spec = spec_file(args.spec, doors, tenant_of(args.address)) if args.spec else None
    client = doors.agent(args.address)
    show = args.timeline or args.follow
    return talk.send(
        client,
        args.address,
        args.text,
        spec=spec,
        kind=args.kind,
        while_busy=args.while_busy,
        show=show,
    )


def _approve(args: argparse.Namespace, settings: Settings, doors: Doors) -> int:
    """The answers are checked before anything is reached: a typo is the user's to fix."""
    answers = talk.answers_of(args.answers)
    client = doors.agent(args.address)
    return talk.approve(
        client, args.address, args.request_id, deny=args.deny, note=args.note, answers=answers
    )


def _publish(args: argparse.Namespace, settings: Settings, doors: Doors) -> int:
    """The file is checked before anything is reached: a wrong spec is the user's to fix."""
    spec = spec_file(args.file, doors, args.tenant)
    admin.specs_publish(doors.tenant(args.tenant), args.tenant, spec)
    return 0


def _chat(args: argparse.Namespace, settings: Settings, doors: Doors) -> int:
    spec = spec_file(args.spec, doors, tenant_of(args.address)) if args.spec else None
    talk.open_chat(doors.agent(args.address), args.address, spec)
    return 0


def _show(doors: Doors, address: str) -> int:
    """From the agent itself (through ingress): the queue and token use are not in the
    catalog the gateway serves. An agent the catalog does not have is not made up."""
    talk.require_agent(doors.agent(address), address)
    status = doors.ingress.status(address)
    print(
        f"{status.address}: {status.state}, turn {status.turn}, last seq {status.last_seq}, "
        f"last outcome {status.last_outcome or '-'}, {status.queued} queued, "
        f"{status.tokens_used} tokens on {status.tokens_day or '-'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
