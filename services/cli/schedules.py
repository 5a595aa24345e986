"""`teaspill schedules add/list/remove`: an agent's schedules, through the gateway."""

from __future__ import annotations

import argparse
from datetime import datetime

from schemas.schedule import At, Cron, Every, Schedule, When
from services.cli.table import table
from services.client import Client

HEADERS = ("ID", "WHEN", "WHILE BUSY", "NEXT FIRE", "FIRED", "SKIPPED", "TEXT")
SHOWN_TEXT = 40


def commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = verbs.add_parser("schedules", help="messages an agent is sent on a clock")
    each = group.add_subparsers(required=True, metavar="VERB")
    add = each.add_parser(
        "add",
        help="send the agent a message on a clock",
        description="Send the agent TEXT every DURATION, at each match of a cron "
        "expression in a time zone, or once at an instant. Each fire is a message like one "
        "sent by hand; `schedule_fired` on the timeline says which schedule sent it.",
    )
    add.add_argument("address")
    add.add_argument("text")
    clock = add.add_mutually_exclusive_group(required=True)
    clock.add_argument("--every", metavar="DURATION", help="as in 90s, 5m, 1h30m, 2d")
    clock.add_argument("--cron", metavar="FIELDS", help="five fields, as in '0 9 * * 1-5'")
    clock.add_argument("--at", metavar="INSTANT", help="ISO 8601 with an offset, fires once")
    add.add_argument("--zone", default="UTC", help="the time zone --cron reads (default: UTC)")
    add.add_argument(
        "--while-busy",
        choices=("queue", "interrupt", "steer", "skip"),
        default="queue",
        help="what a fire that finds a turn in progress does: its message queues (the "
        "default), interrupts or steers; or the fire is skipped",
    )
    add.add_argument("--kind", help="a published kind, for an agent the first fire creates")
    add.set_defaults(run=lambda a, s, d: _add(d.agent(a.address), a))
    listing = each.add_parser("list", help="the agent's schedules and their next fire")
    listing.add_argument("address")
    listing.set_defaults(run=lambda a, s, d: _list(d.agent(a.address), a.address))
    remove = each.add_parser("remove", help="remove a schedule: it never fires again")
    remove.add_argument("address")
    remove.add_argument("schedule_id", metavar="ID")
    remove.set_defaults(run=lambda a, s, d: _remove(d.agent(a.address), a.address, a.schedule_id))


def _add(client: Client, args: argparse.Namespace) -> None:
    body: dict[str, str] = {"text": args.text}
    for name in ("every", "cron", "at", "kind"):
        if getattr(args, name):
            body[name] = getattr(args, name)
    if args.cron:
        body["zone"] = args.zone
    if args.while_busy != "queue":
        body["while_busy"] = args.while_busy
    made = client.add_schedule(args.address, body)
    print(f"Scheduled {made.id} for {args.address}; it fires first at {_instant(made.next_at)}.")


def _list(client: Client, address: str) -> None:
    listed = client.schedules(address)
    if not listed:
        print(f"{address} has no schedules: `teaspill schedules add` makes one.")
        return
    print(table(HEADERS, [_row(schedule) for schedule in listed]))


def _remove(client: Client, address: str, schedule_id: str) -> None:
    removed = client.remove_schedule(address, schedule_id)
    print(f"Removed {removed.id} of {address}: it fires no more.")


def _row(schedule: Schedule) -> tuple[str, ...]:
    spec = schedule.spec
    text = spec.text if len(spec.text) <= SHOWN_TEXT else spec.text[: SHOWN_TEXT - 1] + "…"
    return (
        schedule.id,
        _when(spec.when),
        spec.while_busy,
        _instant(schedule.next_at),
        str(schedule.fired),
        str(schedule.skipped),
        text.replace("\n", " "),
    )


def _when(when: When) -> str:
    match when:
        case Every(seconds=seconds):
            return f"every {seconds:g}s"
        case Cron(expression=expression, zone=zone):
            return f"cron {expression} ({zone})"
        case At(at=at):
            return f"at {_instant(at)}"


def _instant(at: datetime | None) -> str:
    return at.isoformat(timespec="seconds") if at is not None else "-"
