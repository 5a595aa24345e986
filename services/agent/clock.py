"""The wake's journaled time.

Time comes from the steps a wake journals anyway (each stamps its start and end inside
the step, so a replay reads the same times back). The wake's own start time is Restate's
clock, itself a journaled step, which the driver awaits together with the wake's first
state reads (one round trip for all of them).
"""

from __future__ import annotations

import time

import restate

from services.durable import step_options

STEP = "timestamp"
"""The clock step's name: the one `ctx.time()` journals, so journals of either replay."""


class Clock:
    def __init__(self, ctx: restate.ObjectContext) -> None:
        self._ctx = ctx
        self.first: float | None = None
        """The earliest time the wake has seen."""
        self.now: float | None = None
        """The latest time the wake has seen."""

    def read_step(self) -> restate.RestateDurableFuture[float]:
        """Restate's clock as a journaled step. Unlike `ctx.time()`, whose step is a plain
        function the SDK runs on a thread pool, this one runs on the event loop: no thread
        hop per wake."""
        return self._ctx.run_typed(STEP, _now, step_options(float))

    def saw(self, *times: float) -> None:
        for at in times:
            if not at:
                continue  # a result that carries no time (a workspace tool's, an unknown outcome)
            self.first = at if self.first is None else min(self.first, at)
            self.now = at if self.now is None else max(self.now, at)

    async def read(self) -> float:
        """The latest known time, reading the clock only if no step gave one yet."""
        if self.now is None:
            self.saw(await self.read_step())
        assert self.now is not None
        return self.now


async def _now() -> float:
    return time.time()  # noqa: TID251 - inside the journaled step: replay reads it back
