"""Lifecycle commands: fork an agent, delete one, erase a tenant, list erasures; back up
and restore a whole installation.

Erasures go to Restate ingress (the `Lifecycle` object), as an operator's tool does: a
tenant's erasure removes the keys the gateway would be reached with.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import httpx

from schemas.address import parse_address
from schemas.lifecycle import ArchiveIdle, ErasureRecord, ErasureRequest
from services.cli import home as stack_home
from services.cli.table import table
from services.client import Client
from services.contracts import (
    ARCHIVE,
    ARCHIVE_IDLE,
    ERASE_AGENT,
    ERASE_TENANT,
    ERASURES,
    UNARCHIVE,
    Empty,
)
from services.ingress import Ingress
from services.lifecycle.backup import SHOWN_SKIPPED, create_backup
from services.lifecycle.restore import restore_backup
from services.settings import Settings
from services.stack import StackError

OPERATOR = "cli (operator)"
"""Who an erasure from the CLI is recorded as asked by."""
PATIENCE = 300.0


def agent_commands(agents: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`teaspill agents fork`, `archive`, `unarchive` and `delete`."""
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
    for verb, back in (("archive", False), ("unarchive", True)):
        moved = agents.add_parser(
            verb,
            help="bring an archived agent back into Restate"
            if back
            else "move an idle agent out of Restate to the archive store",
            description="Bring ADDRESS's archived state back into Restate now (its next "
            "message would too)."
            if back
            else "Move ADDRESS's state and timeline out of Restate to the archive store "
            "($TEASPILL_HOME/archive); its next message brings it back with its whole history.",
        )
        moved.add_argument("address")
        moved.set_defaults(
            run=lambda a, s, d, back=back: agents_archive(d.ingress, a.address, back=back)
        )
    idle = agents.add_parser(
        "archive-idle",
        help="archive a tenant's agents idle past TEASPILL_ARCHIVE_IDLE_DAYS",
        description="Archive TENANT's idle agents whose last event is older than --days "
        "(default: TEASPILL_ARCHIVE_IDLE_DAYS; with neither set, nothing is archived). Run it "
        "as often as agents should leave Restate, from cron or by hand.",
    )
    idle.add_argument("tenant")
    idle.add_argument("--days", type=float, default=0.0, help="idle for longer than this")
    idle.set_defaults(run=lambda a, s, d: agents_archive_idle(d.ingress, a.tenant, a.days))
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


def agents_archive(ingress: Ingress, address: str, *, back: bool) -> None:
    address = str(parse_address(address))
    moved = ingress.call(UNARCHIVE if back else ARCHIVE, Empty(), address, patience=PATIENCE)
    if not moved.keys:
        print(f"{address} is not archived; it is in Restate already.")
        return
    done = "Brought back" if back else "Archived"
    print(f"{done} {address}: {moved.keys} keys of its state, {moved.bytes / 1024:.1f} KiB.")


def agents_archive_idle(ingress: Ingress, tenant: str, days: float) -> None:
    parse_address(f"{tenant}.x")
    done = ingress.call(ARCHIVE_IDLE, ArchiveIdle(days), tenant, patience=PATIENCE)
    print(f"Archived {len(done.archived)} idle agents of {tenant}.")
    if done.left:
        print(f"Left {len(done.left)} that started a turn meanwhile: {', '.join(done.left)}.")


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
        "webhooks, schedules and counts. From its start nothing can be made in TENANT again "
        "(no agent, spec, key or memory): the name stays retired. The erasure is recorded "
        "without the erased content.",
    )
    erase.add_argument("tenant")
    erase.set_defaults(run=lambda a, s, d: tenants_erase(d.ingress, a.tenant))
    listed = verbs.add_parser("erasures", help="the erasures made in a tenant")
    listed.add_argument("tenant")
    listed.set_defaults(run=lambda a, s, d: erasures(d.ingress, a.tenant))
    backup = verbs.add_parser("backup", help="back up or restore a whole installation")
    verb = backup.add_subparsers(required=True, metavar="VERB")
    create = verb.add_parser(
        "create",
        help="write one archive of this home, while its stack runs",
        description="Write one archive of everything this home's installation needs to come "
        "back: Restate's data (agents' state and timelines, tenants, all pending work), "
        "workspaces, artifacts and keys. restate-server is paused while its files are "
        "copied (docs/operations.md says how long).",
    )
    create.add_argument("path", type=Path)
    create.set_defaults(run=lambda a, s, d: backup_create(s, a.path))
    restore = verb.add_parser(
        "restore",
        help="bring an archive back into a fresh home",
        description="Check the whole archive, then write it into this home (TEASPILL_HOME), "
        "which must hold no installation; `teaspill up` then starts it, on any ports.",
    )
    restore.add_argument("path", type=Path)
    restore.set_defaults(run=lambda a, s, d: backup_restore(s, a.path))


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


SKIPPED_SAID = 5
"""How many of the entries a backup left out its output names."""


def backup_create(settings: Settings, path: Path) -> None:
    pids, about = _running(settings)
    made = create_backup(settings.home, path, pids=pids, about=about)
    servers = "restate-server" if len(pids) < 2 else f"{len(pids)} restate-server nodes"
    paused = f"{servers} paused {made.pause_seconds:.2f} s" if pids else "the stack was down"
    print(
        f"Backed up {settings.home} to {made.path}: {made.files} files, "
        f"{made.bytes / 2**20:.1f} MiB ({paused})."
    )
    if made.skipped:
        more = len(made.skipped) - SKIPPED_SAID
        tail = (
            f" and {more} more (the manifest names the first {SHOWN_SKIPPED})" if more > 0 else ""
        )
        print(
            f"Left out {len(made.skipped)} entries that are neither a file, a folder nor a "
            f"link (a FIFO, a socket, a device): {', '.join(made.skipped[:SKIPPED_SAID])}{tail}."
        )


def backup_restore(settings: Settings, path: Path) -> None:
    manifest = restore_backup(path, settings.home)
    up = "`teaspill up --cluster`" if (settings.home / "cluster").is_dir() else "`teaspill up`"
    print(
        f"Restored the backup made {manifest['created']} into {settings.home}. {up} "
        "starts it: its first start points Restate's deployments at this home's endpoint and "
        "rebuilds the projection."
    )


def _running(settings: Settings) -> tuple[list[int], dict[str, object]]:
    """The process groups of this home's restate-servers, if they run, and what the
    manifest records."""
    try:
        version = httpx.get(f"{settings.admin_url}/version", timeout=5).json()
        listed = httpx.get(f"{settings.admin_url}/deployments", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return [], {"endpoint_uris": [settings.endpoint_url]}
    uris = [str(d.get("uri")) for d in listed.get("deployments", []) if d.get("uri")]
    about = {"restate_server": version.get("version", ""), "endpoint_uris": uris}
    pids = restate_processes(settings)
    if not pids:
        raise StackError(
            f"restate-server answers at {settings.admin_url}, but no process of this home's "
            "runs it, so it cannot be paused for a consistent copy: back up on the machine "
            "that runs it, with the same TEASPILL_HOME."
        )
    return pids, about


def restate_processes(settings: Settings) -> list[int]:
    """The process groups of this home's restate-servers: the ones `teaspill up` recorded
    (one, or a cluster's nodes), else the processes started on this home's Restate folder
    (a single node's base dir, or a node config of the home's cluster)."""
    recorded = [
        pid
        for name, pid in stack_home.pids(stack_home.read(settings)).items()
        if (name == "restate" or name.startswith("restate-")) and _alive(pid)
    ]
    if recorded:
        return recorded
    base = f"RESTATE_BASE_DIR={(settings.home / 'restate').absolute()}".encode()
    configs = f"{(settings.home / 'cluster').absolute()}/".encode()
    found: set[int] = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            argv = (environ.parent / "cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"restate-server"):
                continue
            ours = base in environ.read_bytes().split(b"\0") or any(
                a.startswith(configs) and a.endswith(b".toml") for a in argv
            )
            group = os.getpgid(int(environ.parent.name))
            if ours and group != os.getpgrp():
                found.add(group)
        except (OSError, ValueError):
            continue
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except OSError:
        return False
    return True
