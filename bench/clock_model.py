"""A model for the live-text benchmark: it writes the wall clock, piece by piece.

Each piece is `@<milliseconds since the epoch> `, written every `INTERVAL` seconds, so a
page that shows live text can tell how long each piece took from the executor to it (both
clocks are this machine's). Loaded by the endpoint through `TEASPILL_MODEL_MODULES`.
"""

from __future__ import annotations

import threading
import time

from schemas.chat import ChatMessage
from schemas.model import ModelReply, ModelRequest, Usage
from services.executor.protocol import TextSink, discard

PIECES = 30
INTERVAL = 0.1


class ClockExecutor:
    def generate(
        self, request: ModelRequest, stop: threading.Event, on_text: TextSink = discard
    ) -> ModelReply:
        pieces: list[str] = []
        for _ in range(PIECES):
            if stop.wait(INTERVAL):
                return ModelReply(
                    ChatMessage(role="assistant", content=""), finish_reason="cancelled"
                )
            piece = f"@{time.time() * 1000:.0f} "  # noqa: TID251 - the wall clock is the point
            pieces.append(piece)
            on_text(piece)
        text = "".join(pieces)
        return ModelReply(ChatMessage(role="assistant", content=text), Usage(1, PIECES))


MODELS = {"clock": ClockExecutor}
