"""Lifecycle commands: fork an agent."""

from __future__ import annotations

import argparse

from services.client import Client


def agent_commands(agents: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`teaspill agents fork`."""
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
