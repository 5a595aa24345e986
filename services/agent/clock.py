"""The wake's journaled time.

Time comes from the steps a wake journals anyway (each stamps its start and end inside
the step, so a replay reads the same times back); only when a wake needs the time before
any step gave it one does it read Restate's clock, itself a journaled step.
"""

from __future__ import annotations

import restate


class Clock:
    def __init__(self, ctx: restate.ObjectContext) -> None:
        self._ctx = ctx
        self.first: float | None = None
        """The earliest time the wake has seen."""
        self.now: float | None = None
        """The latest time the wake has seen."""

    def saw(self, *times: float) -> None:
        for at in times:
            if not at:
                continue  # a reply from an older `Model` service carries no time
            self.first = at if self.first is None else min(self.first, at)
            self.now = at if self.now is None else max(self.now, at)

    async def read(self) -> float:
        """The latest known time, reading the clock only if no step gave one yet."""
        if self.now is None:
            self.saw(await self._ctx.time())
        assert self.now is not None
        return self.now
