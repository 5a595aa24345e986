"""The model executor interface: one method, run on the model's own worker thread."""

from __future__ import annotations

import threading
from typing import Protocol

from schemas.model import ModelReply, ModelRequest


class ModelExecutor(Protocol):
    def generate(self, request: ModelRequest, stop: threading.Event) -> ModelReply:
        """Produce the assistant's next message.

        Blocking; called on one dedicated thread per executor, never two calls at once.
        Must return promptly (with `finish_reason="cancelled"`) once `stop` is set, so that
        no generation outlives the attempt that asked for it.
        """
        ...
