"""`teaspill`: start the stack, talk to agents, read timelines."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from services.cli import stack, talk
from services.ingress import Ingress, IngressError
from services.settings import Settings
from services.specs import SpecError, load_spec
from services.stack import StackError

EXAMPLE_SPEC = Path(__file__).resolve().parents[2] / "examples" / "assistant.toml"
EXAMPLE_AGENT = "local.assistant"


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="teaspill", description=__doc__)
    verbs = cli.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = verbs.add_parser("up", help="start the stack and chat with the example agent")
    up.add_argument("--spec", type=Path, default=EXAMPLE_SPEC, help="agent spec to chat with")
    up.add_argument("--agent", default=EXAMPLE_AGENT, help="address of the agent to chat with")
    up.add_argument("--detach", action="store_true", help="leave the stack running and return")
    up.add_argument("--no-chat", action="store_true", help="serve until Ctrl-C, without a chat")

    verbs.add_parser("down", help="stop a stack started with `up --detach`")
    verbs.add_parser("status", help="say which parts of the stack answer")

    send = verbs.add_parser("send", help="send one message and print the reply")
    send.add_argument("address", help="agent address, e.g. acme.helper")
    send.add_argument("text", help="the message")
    send.add_argument("--spec", type=Path, help="spec file (needed for an agent's first message)")
    send.add_argument("--timeline", action="store_true", help="also print the turn's events")

    chat = verbs.add_parser("chat", help="talk to an agent interactively")
    chat.add_argument("address")
    chat.add_argument("--spec", type=Path, default=EXAMPLE_SPEC)

    timeline = verbs.add_parser("timeline", help="print an agent's timeline")
    timeline.add_argument("address")
    timeline.add_argument("--after", type=int, default=0, help="start after this seq")
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = Settings()
    try:
        return _run(args, settings)
    except (StackError, SpecError) as error:
        print(f"teaspill: {error}", file=sys.stderr)
        return 2
    except IngressError as error:
        print(f"teaspill: the agent refused: {error.message} ({error.status})", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, settings: Settings) -> int:
    match args.command:
        case "up":
            return _up(args, settings)
        case "down":
            return stack.down(settings)
        case "status":
            return stack.status(settings)
    ingress = Ingress(settings.ingress_url)
    try:
        match args.command:
            case "send":
                spec = load_spec(args.spec) if args.spec else None
                return talk.send(ingress, args.address, args.text, spec, show=args.timeline)
            case "chat":
                talk.chat(ingress, args.address, load_spec(args.spec))
            case "timeline":
                talk.timeline(ingress, args.address, args.after)
        return 0
    finally:
        ingress.close()


def _up(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_spec(args.spec)
    running = stack.start(settings)
    if args.detach:
        print(
            f"The stack is up; `teaspill send {args.agent} 'hello' --spec {args.spec}` talks "
            "to it and `teaspill down` stops it."
        )
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if args.no_chat or not sys.stdin.isatty():
            print("The stack is up. Ctrl-C stops it.")
            signal.pause()
        else:
            ingress = Ingress(settings.ingress_url)
            talk.chat(ingress, args.agent, spec)
            ingress.close()
    except KeyboardInterrupt:
        pass
    finally:
        print("Stopping the stack")
        running.down()
        stack.run_file(settings).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
