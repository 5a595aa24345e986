"""On a PostgreSQL projection, the gateway hears of new events from the database itself:
it listens on the channel each commit notifies (`ADDRESS SEQ` per agent) and nudges the
followed agents' feeds, as a projector's HTTP notice would (`/internal/projected`), so no
gateway needs to be listed in `TEASPILL_NOTIFY_URLS`.

A notice is a hint: one missed while the connection is down costs the followers their
slow poll, never an event. A connection that fails is logged once and opened again
`RETRY_AFTER` seconds later, until it answers; the gateway never fails for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence

import psycopg
from psycopg import sql

from schemas.projection import Projected
from services.projection.stores import CHANNEL

RETRY_AFTER = 1.0
log = logging.getLogger(__name__)
Told = Callable[[Sequence[Projected]], object]


def parsed(payload: str) -> Projected | None:
    """A notice's `ADDRESS SEQ`; None for one that is not."""
    agent, _, seq = payload.rpartition(" ")
    return Projected(agent, int(seq)) if agent and seq.isdigit() else None


async def listen(url: str, told: Told, retry_after: float = RETRY_AFTER) -> None:
    """Tell `told` of every commit's notices, for as long as it runs (cancel to stop)."""
    failing = False
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
                await db.execute(sql.SQL("listen {}").format(sql.Identifier(CHANNEL)))
                if failing:
                    log.info("listening on %s again", CHANNEL)
                failing = False
                async for notice in db.notifies():
                    projected = parsed(notice.payload)
                    if projected is not None:
                        told((projected,))
        except psycopg.Error as error:
            if not failing:
                log.warning("cannot listen on %s (%s): followers poll", CHANNEL, error)
            failing = True
        await asyncio.sleep(retry_after)


@contextlib.asynccontextmanager
async def listening(url: str, told: Told) -> AsyncIterator[None]:
    """`listen` while the block runs, when `url` names a PostgreSQL projection."""
    if not url:
        yield
        return
    task = asyncio.create_task(listen(url, told), name="projection notices")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
