"""Observers: told about every event an agent records (metrics, tracing, audit).

Observation fails open: an observer that raises is logged and the run goes on. An
observer may see an event again when a wake replays after a crash.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from schemas.events import Event
from services.config import plugin

Observer = Callable[[Event], None]
log = logging.getLogger("teaspill.observers")


def notify(observers: Sequence[Observer], events: Sequence[Event]) -> None:
    for observer in observers:
        for event in events:
            try:
                observer(event)
            except Exception:
                log.exception("observer %r failed on event %s", observer, event.seq)


def load_observers(modules: Sequence[str]) -> list[Observer]:
    """The `OBSERVERS` list of each named module."""
    found: list[Observer] = []
    for name in modules:
        found.extend(plugin(name, "OBSERVERS", "TEASPILL_OBSERVER_MODULES"))
    return found
