"""The agent's side of the workspace tools: a durable call to the `Workspace` service on
the execution plane (never a step in this process), and the events its reply records."""

from __future__ import annotations

import restate

from schemas.events import ArtifactWritten
from schemas.harness import CallTool, TurnState
from schemas.workspace import WORKSPACE_TOOL_NAMES, WorkspaceCall, WorkspaceReply
from services.contracts import WORKSPACE_CALL
from services.durable import call


def is_workspace_tool(name: str) -> bool:
    return name in WORKSPACE_TOOL_NAMES


async def call_workspace(
    ctx: restate.ObjectContext, address: str, turn: TurnState, command: CallTool
) -> tuple[WorkspaceReply, tuple[ArtifactWritten, ...]]:
    settings = turn.spec.workspace
    lent_by = turn.parent.address if turn.parent and settings.lend_to_children else None
    request = WorkspaceCall(address, command.call, command.idempotency_key, settings, lent_by)
    reply = await call(ctx, WORKSPACE_CALL, request)
    written = tuple(
        ArtifactWritten(command.call.id, a.path, a.size, a.sha256) for a in reply.artifacts
    )
    return reply, written
