"""The `Model` service: the execution plane's model step, served over Restate.

One call is one round's model step. The request names a chain: its model, then its
fallbacks. Each model is tried as its own journaled step; when one fails (an error, a
timeout, a server gone, output that cannot be parsed) the round starts again on the next,
with a new live attempt, so what followers saw of the failed one is taken back. The reply
names the model that answered and lists the fallbacks taken, for the agent to record.
A local-only request never reaches a model tagged `external`: it fails with a sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterable
from datetime import timedelta
from typing import Any

import msgspec
import restate

from schemas.model import Fallback, ModelReply, ModelRequest
from services.executor.chat_api import ModelError
from services.executor.config import ModelConfigError
from services.executor.live import LiveText, Post
from services.executor.protocol import discard
from services.executor.registry import ModelRegistry, UnknownModelError

FINAL_PUSH_SECONDS = 1.0
GENERATION_TIMEOUT = timedelta(minutes=15)
"""Above the worst generation time on a CPU, so Restate never aborts a healthy call."""
CANCELLED = 409
"""The status of the TerminalError Restate raises in a cancelled invocation."""
MODEL_FAILED = 502


def model_service(
    models: ModelRegistry, live: Post | None = None, local_only_tenants: Iterable[str] = ()
) -> restate.Service:
    """`live`, when given, receives the text of replies as it is written. Agents of
    `local_only_tenants` run only on local models."""
    service = restate.Service(
        "Model",
        description="Runs model steps for agents.",
        inactivity_timeout=GENERATION_TIMEOUT,
        abort_timeout=timedelta(seconds=30),
    )
    tenants = frozenset(local_only_tenants)

    @service.handler()
    async def generate(ctx: restate.Context, request: ModelRequest) -> ModelReply:
        local_only = request.local_only or request.agent.split(".", 1)[0] in tenants
        chain = _chain(models, request, local_only=local_only)
        return await _Round(ctx, models, live, request).run(chain, local_only=local_only)

    return service


def _chain(models: ModelRegistry, request: ModelRequest, *, local_only: bool) -> list[str]:
    """The models to try, each known; the first one allowed."""
    chain = [request.model, *request.fallback]
    try:
        trust = [models.trust(name) for name in chain]
    except UnknownModelError as error:
        raise restate.TerminalError(str(error), status_code=404) from error
    if local_only and trust[0] == "external":
        raise restate.TerminalError(
            f"The model {chain[0]!r} is external, and this agent runs only on local models "
            "(its spec or its tenant is local-only).",
            status_code=403,
        )
    return chain


class _Round:
    def __init__(
        self, ctx: restate.Context, models: ModelRegistry, live: Post | None, request: ModelRequest
    ) -> None:
        self._ctx = ctx
        self._models = models
        self._live = live
        self._request = request
        self._cancelled = asyncio.Event()

    async def run(self, chain: list[str], *, local_only: bool) -> ModelReply:
        fallbacks: list[Fallback] = []
        for name, following in zip(chain, [*chain[1:], None], strict=True):
            try:
                reply = await self._attempt(name)
            except restate.TerminalError as error:
                if error.status_code == CANCELLED:
                    raise
                if following is None:
                    raise restate.TerminalError(
                        _history(fallbacks, error.message), status_code=MODEL_FAILED
                    ) from error
                if local_only and self._models.trust(following) == "external":
                    raise restate.TerminalError(
                        _history(fallbacks, error.message) + f" Its fallback {following!r} is "
                        "external, and this agent runs only on local models, so the round "
                        "was not tried on it.",
                        status_code=MODEL_FAILED,
                    ) from error
                fallbacks.append(Fallback(name, following, error.message))
                continue
            return msgspec.structs.replace(reply, model=name, fallbacks=tuple(fallbacks))
        raise AssertionError("a chain has at least one model")  # pragma: no cover

    async def _attempt(self, name: str) -> ModelReply:
        request, live = self._request, self._live
        text = LiveText(request, live) if live is not None and request.agent else None
        pusher = asyncio.create_task(text.run()) if text is not None else None
        attempt = self._ctx.request().attempt_finished_event

        async def run() -> ModelReply:
            try:
                return await self._models.runner(name).generate(
                    request,
                    lambda: _first_of(self._cancelled.wait(), attempt.wait()),  # type: ignore[no-untyped-call]
                    on_text=text.write if text is not None else discard,
                )
            except (ModelError, ModelConfigError, ValueError) as error:
                raise restate.TerminalError(str(error), status_code=MODEL_FAILED) from error

        # The generation runs as a step so that this handler awaits a Restate future: only
        # then does it see a cancellation, and can stop the model.
        try:
            return await self._ctx.run_typed(
                f"generate {name}", run, restate.RunOptions(type_hint=ModelReply, max_attempts=3)
            )
        except restate.TerminalError as error:
            if error.status_code == CANCELLED:
                self._cancelled.set()
            raise
        finally:
            if pusher is not None:
                pusher.cancel()
            if text is not None:
                # The rest of the text, before the round is recorded: a short reply may
                # have been written between two pushes.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(text.push(), FINAL_PUSH_SECONDS)


def _history(fallbacks: list[Fallback], last: str) -> str:
    """The failures of a round, earliest first, as sentences."""
    return " ".join([*(f.reason for f in fallbacks), last])


async def _first_of(*waits: Coroutine[Any, Any, Any]) -> None:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
