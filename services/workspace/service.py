"""The `Workspace` service: the execution plane's workspace tools, served over Restate.

A call is one journaled step. A command's step begins its idempotency key in the effect
ledger (`services/effects`) first and records its reply before it returns, so a command
interrupted by a crash is never run again (its retry answers with an unknown outcome), and
a retry of one that finished gets the recorded reply. A cancelled call (a stop) kills the
command's process tree.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import restate

from schemas.effects import Finished
from schemas.lifecycle import Copied, Erased, WorkspaceErase, WorkspaceFork
from schemas.workspace import WorkspaceCall, WorkspaceReply
from services.contracts import (
    WORKSPACE,
    WORKSPACE_CALL,
    WORKSPACE_ERASE,
    WORKSPACE_FORK,
    WORKSPACE_FORKABLE,
    Empty,
)
from services.durable import NO_JOURNAL, step_options
from services.effects.ledger import EffectLedger
from services.workspace.lifecycle import (
    copy_workspace,
    erase_artifacts,
    erase_workspaces,
    occupied,
)
from services.workspace.tools import WorkspaceHost, unknown

CALL_TIMEOUT = timedelta(minutes=15)
"""Above the longest wall-time limit a command may have, so Restate never aborts one."""


def workspace_service(host: WorkspaceHost, ledger: EffectLedger) -> restate.Service:
    service = restate.Service(
        WORKSPACE,
        description="Runs agents' workspace tools: sandboxed commands and files.",
        inactivity_timeout=CALL_TIMEOUT,
        abort_timeout=timedelta(seconds=30),
        journal_retention=NO_JOURNAL,  # files, under no agent's key an erasure could purge
    )

    @service.handler(name=WORKSPACE_CALL.name)
    async def call(ctx: restate.Context, request: WorkspaceCall) -> WorkspaceReply:
        cancelled = asyncio.Event()
        attempt = ctx.request().attempt_finished_event

        def stopped() -> bool:
            return cancelled.is_set() or attempt.is_set()

        async def step() -> WorkspaceReply:
            if request.call.name != "run_command":
                return await host.perform(request, stopped)
            key = request.idempotency_key
            claim = await asyncio.to_thread(ledger.begin, key)
            if not claim.first:
                done = claim.finished
                if done is None:
                    return unknown(request)
                return WorkspaceReply(done.result, done.artifacts)
            reply = await host.perform(request, stopped)
            await asyncio.to_thread(ledger.finish, key, Finished(reply.result, reply.artifacts))
            return reply

        # The call runs as a step so that this handler awaits a Restate future: only then
        # does it see a cancellation, and can kill the command.
        try:
            reply = await ctx.run_typed(request.call.name, step, step_options(WorkspaceReply))
        except restate.TerminalError:
            cancelled.set()
            raise
        return reply

    _lifecycle(service, host)
    return service


def _lifecycle(service: restate.Service, host: WorkspaceHost) -> None:
    """A fork's copy of a workspace, and the erasure of workspaces and artifacts."""

    @service.handler(name=WORKSPACE_FORKABLE.name)
    async def forkable(ctx: restate.Context, request: WorkspaceFork) -> Empty:
        """Refuse a fork onto an address that has a workspace: an agent there is archived,
        or left it, and its files are not the fork's to write into."""

        def look() -> bool:
            return occupied(host.home, request.target)

        if await ctx.run_typed("occupied", look, step_options(bool)):
            raise restate.TerminalError(
                f"{request.target} has a workspace already: a fork needs an address no agent "
                "has used.",
                409,
            )
        return Empty()

    @service.handler(name=WORKSPACE_FORK.name)
    async def fork(ctx: restate.Context, request: WorkspaceFork) -> Copied:
        """A fork's own copy of its source's workspace, as it is now."""

        def copy() -> Copied:
            quota = request.quota_mb * 2**20
            files = copy_workspace(host.home, request.source, request.target, quota, host.volumes)
            return Copied(files)

        return await ctx.run_typed("copy", copy, step_options(Copied))

    @service.handler(name=WORKSPACE_ERASE.name)
    async def erase(ctx: restate.Context, request: WorkspaceErase) -> Erased:
        """Remove the agents' workspaces and the artifacts only they wrote."""

        def remove() -> Erased:
            workspaces = erase_workspaces(host.home, request.agents)
            return Erased(workspaces, erase_artifacts(host.store, request.artifacts))

        return await ctx.run_typed("erase", remove, step_options(Erased))
