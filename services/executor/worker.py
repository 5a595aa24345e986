"""Runs a blocking model executor on its own thread, without outliving the attempt."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from schemas.model import ModelReply, ModelRequest
from services.executor.protocol import ModelExecutor, TextSink, discard


class ModelWorker:
    """One executor, one thread: calls queue in order and never overlap.

    `generate` is awaited from a Restate handler. When `cancelled` completes (the attempt
    finished: cancel, abort, retry) or the awaiting task is cancelled, the executor is told
    to stop and `generate` waits for the thread to return before it does, so no generation
    keeps the CPU busy for an attempt that no longer exists.
    """

    def __init__(self, executor: ModelExecutor) -> None:
        self._executor = executor
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")

    async def generate(
        self,
        request: ModelRequest,
        cancelled: Callable[[], Awaitable[object]] | None = None,
        on_text: TextSink = discard,
    ) -> ModelReply:
        stop = threading.Event()
        future = self._thread.submit(self._executor.generate, request, stop, on_text)
        work = asyncio.wrap_future(future)
        try:
            await _first_of(work, cancelled)
            if not work.done():
                stop.set()
                await asyncio.wait({work})
        except asyncio.CancelledError:
            stop.set()
            # A call still queued is dropped; one already running is waited for.
            if not future.cancel():
                await _settle(work)
            raise
        return work.result()

    def close(self) -> None:
        """Stop accepting calls and wait for the one in flight to return."""
        self._thread.shutdown(wait=True, cancel_futures=True)


async def _first_of(
    work: asyncio.Future[ModelReply], cancelled: Callable[[], Awaitable[object]] | None
) -> None:
    """Return when `work` is done or `cancelled` completes, whichever is first.

    `asyncio.wait` never cancels what it waits on, so `work` keeps running if the calling
    task is cancelled here, and the caller can still stop it and wait for it.
    """
    if cancelled is None:
        await asyncio.wait({work})
        return
    watch = asyncio.ensure_future(cancelled())
    race: set[asyncio.Future[Any]] = {work, watch}
    try:
        await asyncio.wait(race, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()


async def _settle(work: asyncio.Future[ModelReply]) -> None:
    """Wait for the thread to give `work` back; its outcome no longer matters."""
    if not work.done():
        await asyncio.wait({work})
    if not work.cancelled():
        work.exception()
