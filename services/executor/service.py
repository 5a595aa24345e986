"""The `Model` service: the execution plane's model step, served over Restate."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

import restate

from schemas.model import ModelReply, ModelRequest
from services.executor.live import LiveText, Post
from services.executor.protocol import discard
from services.executor.registry import ModelRegistry, UnknownModelError

FINAL_PUSH_SECONDS = 1.0
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
        cancelled = asyncio.Event()
        attempt = ctx.request().attempt_finished_event

        async def run() -> ModelReply:
            try:
                return await worker.generate(
                    request,
                    lambda: _first_of(cancelled.wait(), attempt.wait()),  # type: ignore[no-untyped-call]
                    on_text=text.write if text is not None else discard,
                )
            except ValueError as error:
                raise restate.TerminalError(str(error), status_code=400) from error

        # The generation runs as a step so that this handler awaits a Restate future: only
        # then does it see a cancellation, and can stop the model's thread.
        try:
            return await ctx.run_typed(
                "generate", run, restate.RunOptions(type_hint=ModelReply, max_attempts=3)
            )
        except restate.TerminalError:
            cancelled.set()
            raise
        finally:
            if pusher is not None:
                pusher.cancel()
            if text is not None:
                # The rest of the text, before the round is recorded: a short reply may
                # have been written between two pushes.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(text.push(), FINAL_PUSH_SECONDS)

    return service


async def _first_of(*waits: Coroutine[Any, Any, Any]) -> None:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
