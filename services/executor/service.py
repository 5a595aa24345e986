"""The `Model` service: the execution plane's model step, served over Restate."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import restate

from schemas.model import ModelReply, ModelRequest
from services.executor.live import LiveText, Post
from services.executor.protocol import discard
from services.executor.registry import ModelRegistry, UnknownModelError

GENERATION_TIMEOUT = timedelta(minutes=15)
"""Above the worst generation time on a CPU, so Restate never aborts a healthy call."""


def model_service(models: ModelRegistry, live: Post | None = None) -> restate.Service:
    """`live`, when given, receives the text of replies as it is written."""
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
        text = LiveText(request, live) if live is not None and request.agent else None
        pusher = asyncio.create_task(text.run()) if text is not None else None
        try:
            return await worker.generate(
                request,
                ctx.request().attempt_finished_event.wait,
                on_text=text.write if text is not None else discard,
            )
        except ValueError as error:
            raise restate.TerminalError(str(error), status_code=400) from error
        finally:
            if pusher is not None:
                pusher.cancel()

    return service
