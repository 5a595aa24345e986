"""One round's model step: its chain of models, each attempt a journaled step.

The request names a chain: its model, then its fallbacks. Each model is tried as its own
journaled step; when one fails (an error, a timeout, a server gone, output that cannot be
parsed) the round starts again on the next, with a new live attempt, so what followers
saw of the failed one is taken back. The reply names the model that answered and lists
the fallbacks taken, for the agent to record. A local-only request never reaches a model
tagged `external`: it fails with a sentence.

The `Model` service runs this for a control plane deployed apart; when both planes share
a process the agent runs it inside its own wake (no extra invocation). Either way each
attempt is a `ctx.run` step of the invocation, so the reply, and the times stamped on it,
are journaled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence

import msgspec
import restate
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from schemas.address import tenant_of
from schemas.model import Fallback, ModelReply, ModelRequest
from services.durable import CANCELLED, Cancelled, StepRefusedError, cancellable_step
from services.executor.chat_api import ModelError
from services.executor.config import ModelConfigError
from services.executor.errors import for_log, public
from services.executor.live import LiveText, Post
from services.executor.protocol import discard
from services.executor.registry import ModelRegistry, UnknownModelError
from services.observe import genai, tracing

log = logging.getLogger(__name__)

FINAL_PUSH_SECONDS = 1.0
MODEL_FAILED = 502


class ModelCrashedError(Exception):
    """A model raised something else than a `ModelError`. The step retries it; when its
    attempts run out, Restate fails the step with the exception's `repr`, which is made
    the sentence here instead of the class and the library's text."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.sentence = (
            f"The model {name!r} failed with an unexpected error (the execution plane's log "
            "says more)."
        )

    def __repr__(self) -> str:
        return self.sentence

    def __str__(self) -> str:
        return self.sentence


class ModelRunner:
    """`live`: the gateways that receive the text of replies as it is written (none: it
    is not shown live). Agents of `local_only_tenants` run only on local models."""

    def __init__(
        self,
        models: ModelRegistry,
        live: Sequence[Post] = (),
        local_only_tenants: Iterable[str] = (),
    ) -> None:
        self._models = models
        self._live = live
        self._tenants = frozenset(local_only_tenants)

    def forget(self, agents: Sequence[str]) -> int:
        """Drop erased agents' prompt-cache entries (`ModelRegistry.forget`)."""
        return self._models.forget(agents)

    async def step(self, ctx: restate.Context, request: ModelRequest) -> ModelReply:
        """The round's model step, as journaled steps of `ctx`'s invocation."""
        local_only = request.local_only or tenant_of(request.agent) in self._tenants
        chain = self._chain(request, local_only=local_only)
        fallbacks: list[Fallback] = []
        for name, following in zip(chain, [*chain[1:], None], strict=True):
            try:
                reply = await self._attempt(ctx, name, request)
            except restate.TerminalError as error:
                if error.status_code == CANCELLED:
                    raise
                reason = public(error.message)
                self._give_up(fallbacks, reason, following, local_only=local_only)
                assert following is not None
                fallbacks.append(Fallback(name, following, reason))
                continue
            return msgspec.structs.replace(reply, model=name, fallbacks=tuple(fallbacks))
        raise AssertionError("a chain has at least one model")  # pragma: no cover

    def _chain(self, request: ModelRequest, *, local_only: bool) -> list[str]:
        """The models to try, each known; the first one allowed."""
        chain = [request.model, *request.fallback]
        try:
            trust = [self._models.trust(name) for name in chain]
        except UnknownModelError as error:
            raise restate.TerminalError(public(str(error)), status_code=404) from error
        if local_only and trust[0] == "external":
            raise restate.TerminalError(
                f"The model {chain[0]!r} is external, and this agent runs only on local "
                "models (its spec or its tenant is local-only).",
                status_code=403,
            )
        return chain

    def _give_up(
        self,
        fallbacks: list[Fallback],
        reason: str,
        following: str | None,
        *,
        local_only: bool,
    ) -> None:
        """Raise when the round cannot go on to `following`."""
        if following is None:
            raise restate.TerminalError(_history(fallbacks, reason), status_code=MODEL_FAILED)
        if local_only and self._models.trust(following) == "external":
            raise restate.TerminalError(
                _history(fallbacks, reason) + f" Its fallback {following!r} is "
                "external, and this agent runs only on local models, so the round was not "
                "tried on it.",
                status_code=MODEL_FAILED,
            )

    async def _attempt(self, ctx: restate.Context, name: str, request: ModelRequest) -> ModelReply:
        parent = tracing.attempt(ctx)
        return await cancellable_step(
            ctx,
            f"model {name} r{request.round}",
            lambda cancelled: self._traced(parent, name, request, cancelled),
            ModelReply,
        )

    async def _traced(
        self, parent: Context | None, name: str, request: ModelRequest, cancelled: Cancelled
    ) -> ModelReply:
        """The attempt inside its span: made only when the step runs, never on a replay."""
        attributes = genai.model_request(name, request)
        with tracing.span(f"chat {name}", parent, attributes, SpanKind.CLIENT) as made:
            reply = await self._generate(name, request, cancelled)
            genai.model_reply(made, msgspec.structs.replace(reply, model=reply.model or name))
            return reply

    async def _generate(self, name: str, request: ModelRequest, cancelled: Cancelled) -> ModelReply:
        """One attempt on one model, stamped with when it ran (inside the journaled step)."""
        live = self._live
        text = LiveText(request, live) if live and request.agent else None
        pusher = asyncio.create_task(text.run()) if text is not None else None
        started = time.time()  # noqa: TID251 - inside the journaled step: replay reads it back
        try:
            runner = self._models.runner(name)
            reply = await runner.generate(
                request, cancelled, on_text=text.write if text is not None else discard
            )
        except UnknownModelError as error:
            raise StepRefusedError(404, public(str(error))) from error
        except (ModelError, ModelConfigError, ValueError) as error:
            log.warning("The model %s failed: %s", name, for_log(str(error)))
            raise StepRefusedError(MODEL_FAILED, public(str(error))) from error
        except Exception as error:  # retried by the step, then failed with a sentence
            log.exception("The model %s raised", name)
            raise ModelCrashedError(name) from error
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


def _history(fallbacks: list[Fallback], last: str) -> str:
    """The failures of a round, earliest first, as sentences."""
    return " ".join([*(f.reason for f in fallbacks), last])
