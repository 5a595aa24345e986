"""Runs a blocking model executor on its own thread, fairly, without outliving the attempt."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import msgspec

from schemas.model import ModelReply, ModelRequest
from services.executor.protocol import ModelExecutor, TextSink, discard


@dataclass
class _Job:
    request: ModelRequest
    on_text: TextSink
    stop: threading.Event = field(default_factory=threading.Event)
    future: Future[ModelReply] = field(default_factory=Future)
    queued: float = field(default_factory=time.perf_counter)


class FairQueue:
    """Jobs served round-robin by agent: each agent with work waiting gets the next turn in
    the order it first queued, so one busy agent cannot starve the others."""

    def __init__(self) -> None:
        self._ready: deque[str] = deque()
        self._jobs: dict[str, deque[_Job]] = {}
        self._changed = threading.Condition()
        self._closed = False

    def put(self, job: _Job) -> None:
        with self._changed:
            if self._closed:
                raise RuntimeError("The model worker is closed; it takes no more calls.")
            agent = job.request.agent
            if agent not in self._jobs:
                self._jobs[agent] = deque()
                self._ready.append(agent)
            self._jobs[agent].append(job)
            self._changed.notify()

    def get(self) -> _Job | None:
        """The next job, or None once closed and drained."""
        with self._changed:
            self._changed.wait_for(lambda: self._ready or self._closed)
            if not self._ready:
                return None
            agent = self._ready.popleft()
            jobs = self._jobs[agent]
            job = jobs.popleft()
            if jobs:
                self._ready.append(agent)
            else:
                del self._jobs[agent]
            return job

    def close(self) -> None:
        """Take no more jobs; the ones still waiting are cancelled."""
        with self._changed:
            self._closed = True
            for jobs in self._jobs.values():
                for job in jobs:
                    job.future.cancel()
            self._jobs.clear()
            self._ready.clear()
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return sum(len(jobs) for jobs in self._jobs.values())


class ModelWorker:
    """One executor, one thread: calls never overlap and are served fairly between agents.

    `generate` is awaited from a Restate handler. When `cancelled` completes (the attempt
    finished: cancel, abort, retry) or the awaiting task is cancelled, the executor is told
    to stop and `generate` waits for the thread to return before it does, so no generation
    keeps the CPU busy for an attempt that no longer exists. The reply's `timing` carries
    how long the call waited in the queue.
    """

    def __init__(self, executor: ModelExecutor) -> None:
        self.executor = executor
        self._queue = FairQueue()
        self._thread = threading.Thread(target=self._serve, name="model", daemon=True)
        self._thread.start()

    async def generate(
        self,
        request: ModelRequest,
        cancelled: Callable[[], Awaitable[object]] | None = None,
        on_text: TextSink = discard,
    ) -> ModelReply:
        job = _Job(request, on_text)
        self._queue.put(job)
        work = asyncio.wrap_future(job.future)
        try:
            await _first_of(work, cancelled)
            if not work.done():
                job.stop.set()
                await asyncio.wait({work})
        except asyncio.CancelledError:
            job.stop.set()
            # A call still queued is dropped; one already running is waited for.
            if not job.future.cancel():
                await _settle(work)
            raise
        return work.result()

    def _serve(self) -> None:
        while (job := self._queue.get()) is not None:
            if not job.future.set_running_or_notify_cancel():
                continue
            waited = time.perf_counter() - job.queued
            try:
                reply = self.executor.generate(job.request, job.stop, job.on_text)
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting caller
                job.future.set_exception(error)
                continue
            timing = msgspec.structs.replace(reply.timing, queue_seconds=waited)
            job.future.set_result(msgspec.structs.replace(reply, timing=timing))

    def close(self) -> None:
        """Stop accepting calls and wait for the one in flight to return."""
        self._queue.close()
        self._thread.join()


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
