"""The endpoint's ASGI lifespan: the heap settled at startup, closers run at shutdown."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

from services.lifespan import YOUNG_OBJECTS, with_shutdown


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
