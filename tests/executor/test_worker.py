"""The model worker: one thread per executor, and no generation outlives its attempt."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from schemas.chat import ChatMessage
from schemas.model import FinishReason, ModelReply, ModelRequest
from services.executor.protocol import TextSink, discard
from services.executor.worker import ModelWorker

REQUEST = ModelRequest(model="fake", messages=(ChatMessage(role="user", content="Hi"),))


class LoopingExecutor:
    """Spins like a generation until `stop` is set, or for `hold` seconds if given."""

    def __init__(self, hold: float | None = None, fail: bool = False) -> None:
        self.hold = hold
        self.fail = fail
        self.calls = 0
        self.active = 0
        self.most_active = 0
        self.threads: set[int] = set()
        self.started = threading.Event()
        self._lock = threading.Lock()

    def generate(
        self, request: ModelRequest, stop: threading.Event, on_text: TextSink = discard
    ) -> ModelReply:
        with self._lock:
            self.calls += 1
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            self.threads.add(threading.get_ident())
        self.started.set()
        try:
            return self._spin(stop)
        finally:
            with self._lock:
                self.active -= 1

    def _spin(self, stop: threading.Event) -> ModelReply:
        deadline = None if self.hold is None else time.monotonic() + self.hold
        finish: FinishReason = "cancelled"
        while not stop.wait(0.002):
            if deadline is not None and time.monotonic() >= deadline:
                finish = "stop"
                break
        if self.fail:
            raise ValueError("The prompt does not fit.")
        return ModelReply(
            message=ChatMessage(role="assistant", content="..."), finish_reason=finish
        )


async def started(executor: LoopingExecutor) -> None:
    assert await asyncio.to_thread(executor.started.wait, 1.0)


def test_a_call_without_a_cancel_signal_returns_the_reply() -> None:
    worker = ModelWorker(LoopingExecutor(hold=0.01))
    reply = asyncio.run(worker.generate(REQUEST))
    worker.close()
    assert reply.finish_reason == "stop"


def test_when_the_attempt_ends_the_generation_stops_before_generate_returns() -> None:
    executor = LoopingExecutor()
    worker = ModelWorker(executor)

    async def scenario() -> ModelReply:
        attempt_finished = asyncio.Event()
        call = asyncio.create_task(worker.generate(REQUEST, attempt_finished.wait))
        await started(executor)
        attempt_finished.set()
        return await asyncio.wait_for(call, timeout=1.0)

    reply = asyncio.run(scenario())
    assert reply.finish_reason == "cancelled"
    assert executor.active == 0
    worker.close()


def test_cancelling_the_caller_stops_the_generation_and_reraises() -> None:
    executor = LoopingExecutor()
    worker = ModelWorker(executor)

    async def scenario() -> None:
        call = asyncio.create_task(worker.generate(REQUEST, asyncio.Event().wait))
        await started(executor)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, timeout=1.0)
        assert executor.active == 0

    asyncio.run(scenario())
    worker.close()


def test_calls_queue_on_one_thread_and_never_overlap() -> None:
    executor = LoopingExecutor(hold=0.03)
    worker = ModelWorker(executor)

    async def scenario() -> list[ModelReply]:
        return await asyncio.gather(*(worker.generate(REQUEST) for _ in range(4)))

    replies = asyncio.run(scenario())
    worker.close()
    assert [reply.finish_reason for reply in replies] == ["stop"] * 4
    assert (executor.calls, executor.most_active, len(executor.threads)) == (4, 1, 1)
    assert threading.get_ident() not in executor.threads


def test_a_queued_call_cancelled_before_it_starts_never_runs() -> None:
    executor = LoopingExecutor()
    worker = ModelWorker(executor)

    async def scenario() -> None:
        first_done = asyncio.Event()
        first = asyncio.create_task(worker.generate(REQUEST, first_done.wait))
        await started(executor)
        queued = asyncio.create_task(worker.generate(REQUEST))
        await asyncio.sleep(0.01)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(queued, timeout=1.0)
        first_done.set()
        await asyncio.wait_for(first, timeout=1.0)

    asyncio.run(scenario())
    worker.close()
    assert executor.calls == 1


def test_an_executor_error_reaches_the_caller() -> None:
    worker = ModelWorker(LoopingExecutor(hold=0.0, fail=True))
    with pytest.raises(ValueError, match="does not fit"):
        asyncio.run(worker.generate(REQUEST))
    worker.close()


def test_a_closed_worker_takes_no_more_calls() -> None:
    worker = ModelWorker(LoopingExecutor(hold=0.0))
    worker.close()
    with pytest.raises(RuntimeError):
        asyncio.run(worker.generate(REQUEST))
