"""The `Workspace` service: the execution plane's workspace tools, served over Restate.

A call is one journaled step. A command's step claims its idempotency key in the effect
ledger first, so a command interrupted by a crash is never run again; its retry answers
with an unknown outcome. A cancelled call (a stop) kills the command's process tree.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import restate

from schemas.workspace import WorkspaceCall, WorkspaceReply
from services.contracts import FINISH, WORKSPACE, WORKSPACE_CALL
from services.durable import send, step_options
from services.workspace.effects import EffectLedger, ledger_key
from services.workspace.tools import WorkspaceHost, unknown

CALL_TIMEOUT = timedelta(minutes=15)
"""Above the longest wall-time limit a command may have, so Restate never aborts one."""


def workspace_service(host: WorkspaceHost, ledger: EffectLedger) -> restate.Service:
    service = restate.Service(
        WORKSPACE,
        description="Runs agents' workspace tools: sandboxed commands and files.",
        inactivity_timeout=CALL_TIMEOUT,
        abort_timeout=timedelta(seconds=30),
    )

    @service.handler(name=WORKSPACE_CALL.name)
    async def call(ctx: restate.Context, request: WorkspaceCall) -> WorkspaceReply:
        cancelled = asyncio.Event()
        attempt = ctx.request().attempt_finished_event

        def stopped() -> bool:
            return cancelled.is_set() or attempt.is_set()

        async def step() -> WorkspaceReply:
            if request.call.name == "run_command":
                claim = await ledger.claim(request.idempotency_key)
                if not claim.first:
                    return claim.finished or unknown(request)
            return await host.perform(request, stopped)

        # The call runs as a step so that this handler awaits a Restate future: only then
        # does it see a cancellation, and can kill the command.
        try:
            reply = await ctx.run_typed(request.call.name, step, step_options(WorkspaceReply))
        except restate.TerminalError:
            cancelled.set()
            raise
        if request.call.name == "run_command":
            key = ledger_key(request.idempotency_key)
            send(ctx, FINISH, reply, key=key)
        return reply

    return service
