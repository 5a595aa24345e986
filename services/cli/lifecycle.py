"""Lifecycle commands: fork an agent, delete one, erase a tenant, list erasures.

Erasures go to Restate ingress (the `Lifecycle` object), as an operator's tool does: a
tenant's erasure removes the keys the gateway would be reached with.
"""

from __future__ import annotations

import argparse

from schemas.address import parse_address
from schemas.lifecycle import ErasureRecord, ErasureRequest
from services.cli.table import table
from services.client import Client
from services.contracts import ERASE_AGENT, ERASE_TENANT, ERASURES, Empty
from services.ingress import Ingress

OPERATOR = "cli (operator)"
"""Who an erasure from the CLI is recorded as asked by."""
PATIENCE = 300.0


def agent_commands(agents: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`teaspill agents fork` and `teaspill agents delete`."""
    delete = agents.add_parser(
        "delete",
        help="delete an agent and what it spawned, for good",
        description="Delete ADDRESS and the agents it spawned: what they have in flight is "
        "killed, and their Restate state, timeline, history, projection rows, workspaces, "
        "artifacts only they wrote, effect records and finished invocations are removed. "
        "The erasure is recorded (who, when, what) without the erased content.",
    )
    delete.add_argument("address")
    delete.set_defaults(run=lambda a, s, d: agents_delete(d.ingress, a.address))
    fork = agents.add_parser(
        "fork",
        help="start a new agent from an event of another's timeline",
        description="Make NEW a fork of ADDRESS at SEQ: its timeline is ADDRESS's first SEQ "
        "events, then agent_forked; it holds the turns that had ended by then, runs with the "
        "same spec version and has its own copy of the workspace as it is now. ADDRESS goes "
        "on unchanged.",
    )
    fork.add_argument("address", help="the agent to fork")
    fork.add_argument("seq", type=int, help="the last of its events the fork holds")
    fork.add_argument("new", help="the fork's address, in the same tenant")
    fork.set_defaults(run=lambda a, s, d: agents_fork(d.agent(a.address), a))


def agents_fork(client: Client, args: argparse.Namespace) -> None:
    forked = client.fork(args.address, args.seq, args.new)
    print(
        f"Forked {forked.address} from {forked.source} at seq {forked.seq}: it holds "
        f"{forked.seq} events and its agent_forked (seq {forked.last_seq}), idle after turn "
        f"{forked.turn}. `teaspill send {forked.address} ...` talks to it."
    )


def commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`teaspill tenants erase` and `teaspill erasures`."""
    tenants = verbs.add_parser("tenants", help="whole tenants").add_subparsers(
        required=True, metavar="VERB"
    )
    erase = tenants.add_parser(
        "erase",
        help="erase a tenant and everything of it, for good",
        description="Erase TENANT: every agent as `agents delete` does, then its specs, keys, "
        "webhooks, schedules and counts. The erasure is recorded without the erased content.",
    )
    erase.add_argument("tenant")
    erase.set_defaults(run=lambda a, s, d: tenants_erase(d.ingress, a.tenant))
    listed = verbs.add_parser("erasures", help="the erasures made in a tenant")
    listed.add_argument("tenant")
    listed.set_defaults(run=lambda a, s, d: erasures(d.ingress, a.tenant))


def agents_delete(ingress: Ingress, address: str) -> None:
    tenant = parse_address(address).tenant
    request = ErasureRequest(address, OPERATOR)
    _said(ingress.call(ERASE_AGENT, request, tenant, patience=PATIENCE))


def tenants_erase(ingress: Ingress, tenant: str) -> None:
    parse_address(f"{tenant}.x")
    _said(ingress.call(ERASE_TENANT, ErasureRequest("", OPERATOR), tenant, patience=PATIENCE))


def _said(record: ErasureRecord) -> None:
    print(
        f"Erased {record.what} {record.target}: {len(record.agents)} agents, {record.events} "
        f"events, {record.workspaces} workspaces, {record.artifacts} artifacts, "
        f"{record.invocations} invocations, {record.state_keys} objects' state."
    )


def erasures(ingress: Ingress, tenant: str) -> None:
    records = ingress.call(ERASURES, Empty(), tenant).records
    if not records:
        print(f"No erasure was made in tenant {tenant}.")
        return
    rows = [
        (f"{r.at:%Y-%m-%d %H:%M}", r.by or "-", r.what, r.target, len(r.agents), r.events)
        for r in records
    ]
    print(table(("AT", "BY", "WHAT", "TARGET", "AGENTS", "EVENTS"), rows))
