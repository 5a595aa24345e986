"""The model executor interface: one method, run on the model's own worker thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from schemas.model import ModelReply, ModelRequest

TextSink = Callable[[str], None]
"""Receives the reply's text as it is written, piece by piece (not tool-call JSON)."""


def discard(_text: str) -> None:
    """A sink for callers that do not stream."""


class ModelExecutor(Protocol):
    def generate(
        self, request: ModelRequest, stop: threading.Event, on_text: TextSink = discard
    ) -> ModelReply:
        """Produce the assistant's next message.

        Blocking; called on one dedicated thread per executor, never two calls at once.
        Must return promptly (with `finish_reason="cancelled"`) once `stop` is set, so that
        no generation outlives the attempt that asked for it.
        """
        ...
