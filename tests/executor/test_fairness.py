"""Calls to one model are served round-robin between agents, and the wait is recorded."""

from __future__ import annotations

import asyncio
import threading

from schemas.chat import ChatMessage
from schemas.model import ModelReply, ModelRequest
from services.executor.protocol import TextSink, discard
from services.executor.worker import ModelWorker


def request(agent: str, n: int) -> ModelRequest:
    return ModelRequest("fake", (ChatMessage(role="user", content=str(n)),), agent=agent)


class Recorder:
    """Holds the first call until released, then answers at once, noting the order."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.release = threading.Event()

    def generate(
        self, request: ModelRequest, stop: threading.Event, on_text: TextSink = discard
    ) -> ModelReply:
        self.release.wait(2.0)
        self.order.append(f"{request.agent}{request.messages[0].content}")
        return ModelReply(ChatMessage(role="assistant", content="ok"))


def test_a_busy_agent_does_not_starve_the_others() -> None:
    recorder = Recorder()
    worker = ModelWorker(recorder)

    async def scenario() -> list[ModelReply]:
        calls = [asyncio.create_task(worker.generate(request("a.busy", 0)))]
        await asyncio.sleep(0.05)  # the first call is running; the rest queue behind it
        calls += [asyncio.create_task(worker.generate(request("a.busy", n))) for n in (1, 2, 3)]
        await asyncio.sleep(0.01)
        calls += [asyncio.create_task(worker.generate(request("b.quiet", n))) for n in (1, 2)]
        await asyncio.sleep(0.01)
        calls.append(asyncio.create_task(worker.generate(request("c.late", 1))))
        await asyncio.sleep(0.05)
        recorder.release.set()
        return await asyncio.gather(*calls)

    replies = asyncio.run(scenario())
    worker.close()
    assert recorder.order == [
        "a.busy0", "a.busy1", "b.quiet1", "c.late1", "a.busy2", "b.quiet2", "a.busy3"
    ]  # fmt: skip
    first, queued = replies[0], replies[1]
    assert first.timing.queue_seconds < 0.05
    assert queued.timing.queue_seconds >= 0.06, "the second call waited for the first"
