"""`teaspill hooks create/list/remove`: a tenant's webhooks, through the gateway."""

from __future__ import annotations

import argparse

from services.cli.table import table
from services.client import Client, Hook

HEADERS = ("ID", "TARGET", "WHILE BUSY", "CREATED", "URL")
POLICIES = ("queue", "interrupt", "steer", "reject")


def commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = verbs.add_parser("hooks", help="signed webhooks that wake an agent")
    each = group.add_subparsers(required=True, metavar="VERB")
    create = each.add_parser(
        "create",
        help="make a webhook; its signing secret is shown once",
        description="Make a webhook of TENANT: each delivery to its URL, signed as Standard "
        "Webhooks says, becomes a message made from TEMPLATE ({{ field.path }} filled from "
        "the delivered JSON) sent to --address, or to a new agent of --kind.",
    )
    create.add_argument("tenant")
    create.add_argument("template")
    create.add_argument("--address", help="the agent every delivery is sent to")
    create.add_argument("--kind", help="a published kind: a new agent of it per delivery")
    create.add_argument(
        "--while-busy",
        choices=POLICIES,
        default="queue",
        help="what a delivery that finds a turn in progress does (default: queue)",
    )
    create.set_defaults(run=lambda a, s, d: _create(d.tenant(a.tenant), a))
    listing = each.add_parser("list", help="a tenant's webhooks, without their secrets")
    listing.add_argument("tenant")
    listing.set_defaults(run=lambda a, s, d: _list(d.tenant(a.tenant), a.tenant))
    remove = each.add_parser("remove", help="remove a webhook")
    remove.add_argument("hook_id", metavar="ID")
    remove.set_defaults(
        run=lambda a, s, d: _remove(d.tenant(a.hook_id.split(".", 1)[0]), a.hook_id)
    )


def _create(client: Client, args: argparse.Namespace) -> None:
    body: dict[str, str] = {"template": args.template, "while_busy": args.while_busy}
    for name in ("address", "kind"):
        if getattr(args, name):
            body[name] = getattr(args, name)
    made = client.create_hook(body)
    print(f"Created hook {made.id}; deliver to {made.url}")
    print("Its signing secret is shown this once:")
    print(made.secret)


def _list(client: Client, tenant: str) -> None:
    listed = client.hooks()
    if not listed:
        print(f"Tenant {tenant} has no hooks: `teaspill hooks create` makes one.")
        return
    print(table(HEADERS, [_row(hook) for hook in listed]))


def _remove(client: Client, hook_id: str) -> None:
    removed = client.remove_hook(hook_id)
    print(f"Removed hook {removed.id}: its deliveries do nothing from now on.")


def _row(hook: Hook) -> tuple[str, ...]:
    target = hook.address or f"a new {hook.kind} per delivery"
    return (hook.id, target, hook.while_busy, hook.created or "-", hook.url)
