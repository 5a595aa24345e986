"""The endpoint's ASGI lifespan: the heap settled at startup, closers run at shutdown."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

from services.lifespan import STEP_THREADS, YOUNG_OBJECTS, with_shutdown


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


async def _never(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("the lifespan is not passed on to the Restate app")


def test_startup_freezes_what_startup_built_and_shutdown_closes(collector: None) -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    async def run() -> list[str]:
        messages = asyncio.Queue[MutableMapping[str, Any]]()
        for kind in ("lifespan.startup", "lifespan.shutdown"):
            messages.put_nowait({"type": kind})
        sent: list[str] = []

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message["type"])

        await with_shutdown(_never, [close])({"type": "lifespan"}, messages.get, send)
        return sent

    frozen = gc.get_freeze_count()
    sent = asyncio.run(run())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert closed == ["closed"]
    assert gc.get_freeze_count() > frozen
    assert gc.get_threshold()[0] == YOUNG_OBJECTS


def test_steps_stuck_past_the_default_pool_do_not_hold_the_next_one(collector: None) -> None:
    """All but one of the pool's threads wait (plugin tools waiting out their deadline); one
    more step still runs at once. Python's own pool has at most 32 threads, 6 on 2 cores."""

    async def run() -> str:
        messages = asyncio.Queue[MutableMapping[str, Any]]()
        messages.put_nowait({"type": "lifespan.startup"})

        async def send(message: MutableMapping[str, Any]) -> None:
            return None

        async def serve() -> None:
            await with_shutdown(_never, [])({"type": "lifespan"}, messages.get, send)

        serving = asyncio.create_task(serve())
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        release = threading.Event()
        stuck = [loop.run_in_executor(None, release.wait) for _ in range(STEP_THREADS - 1)]
        try:
            return await asyncio.wait_for(loop.run_in_executor(None, lambda: "ran"), 5)
        finally:
            release.set()
            await asyncio.gather(*stuck)
            messages.put_nowait({"type": "lifespan.shutdown"})
            await serving

    assert asyncio.run(run()) == "ran"
