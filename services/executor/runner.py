"""One model step, from a request to a reply: the worker, live text, stop, timing.

The `Model` service runs it for a control plane deployed apart; when both planes share a
process the agent runs it as a local journaled step instead (no extra invocation). Both
run it inside `ctx.run`, so the reply, and the times stamped on it, are journaled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import msgspec

from schemas.model import ModelReply, ModelRequest
from services.durable import Cancelled, StepRefusedError
from services.executor.live import LiveText, Post
from services.executor.protocol import discard
from services.executor.registry import ModelRegistry

FINAL_PUSH_SECONDS = 1.0


class ModelRunner:
    """`live`, when given, receives the text of replies as it is written."""

    def __init__(self, models: ModelRegistry, live: Post | None = None) -> None:
        self._models = models
        self._live = live

    async def run(self, request: ModelRequest, cancelled: Cancelled) -> ModelReply:
        """Generate until done or until `cancelled` completes; raises StepRefusedError
        for an unknown model or a prompt that cannot fit."""
        try:
            worker = self._models.worker(request.model)
        except LookupError as error:
            raise StepRefusedError(404, str(error)) from error
        text = LiveText(request, self._live) if self._live is not None and request.agent else None
        pusher = asyncio.create_task(text.run()) if text is not None else None
        started = time.time()  # noqa: TID251 - inside the journaled step: replay reads it back
        try:
            reply = await worker.generate(
                request, cancelled, on_text=text.write if text is not None else discard
            )
        except ValueError as error:
            raise StepRefusedError(400, str(error)) from error
        finally:
            if pusher is not None:
                pusher.cancel()
            if text is not None:
                # The rest of the text, before the round is recorded: a short reply may
                # have been written between two pushes.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(text.push(), FINAL_PUSH_SECONDS)
        finished = time.time()  # noqa: TID251 - inside the journaled step
        return msgspec.structs.replace(reply, started=started, finished=finished)

    def close(self) -> None:
        self._models.close()
