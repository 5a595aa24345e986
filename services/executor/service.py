"""The `Model` service: the execution plane's model step, served over Restate."""

from __future__ import annotations

from datetime import timedelta

import restate

from schemas.model import ModelReply, ModelRequest
from services.executor.registry import ModelRegistry, UnknownModelError

GENERATION_TIMEOUT = timedelta(minutes=15)
"""Above the worst generation time on a CPU, so Restate never aborts a healthy call."""


def model_service(models: ModelRegistry) -> restate.Service:
    service = restate.Service(
        "Model",
        description="Runs model steps for agents.",
        inactivity_timeout=GENERATION_TIMEOUT,
        abort_timeout=timedelta(seconds=30),
    )

    @service.handler()
    async def generate(ctx: restate.Context, request: ModelRequest) -> ModelReply:
        try:
            worker = models.worker(request.model)
        except UnknownModelError as error:
            raise restate.TerminalError(str(error), status_code=404) from error
        try:
            return await worker.generate(request, ctx.request().attempt_finished_event.wait)
        except ValueError as error:
            raise restate.TerminalError(str(error), status_code=400) from error

    return service
