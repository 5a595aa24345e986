"""The `Model` service: the execution plane's model step, served over Restate, for a
control plane deployed apart from it (`runner.py` says what one step does)."""

from __future__ import annotations

from datetime import timedelta

import restate

from schemas.lifecycle import ErasureTargets
from schemas.model import ModelReply, ModelRequest
from services.contracts import FORGET, GENERATE, MODEL, Empty
from services.durable import NO_JOURNAL
from services.executor.runner import ModelRunner

GENERATION_TIMEOUT = timedelta(minutes=15)
"""Above the worst generation time on a CPU, so Restate never aborts a healthy call."""


def model_service(runner: ModelRunner) -> restate.Service:
    service = restate.Service(
        MODEL,
        description="Runs model steps for agents.",
        inactivity_timeout=GENERATION_TIMEOUT,
        abort_timeout=timedelta(seconds=30),
        journal_retention=NO_JOURNAL,  # prompts, under no agent's key an erasure could purge
    )

    @service.handler(name=GENERATE.name)
    async def generate(ctx: restate.Context, request: ModelRequest) -> ModelReply:
        return await runner.step(ctx, request)

    @service.handler(name=FORGET.name)
    async def forget(ctx: restate.Context, erased: ErasureTargets) -> Empty:
        """Drop erased agents' prompt-cache entries (in this process's models)."""
        runner.forget(erased.agents)
        return Empty()

    return service
