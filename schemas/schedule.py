"""Schedules: messages an agent is sent on a clock.

A schedule belongs to one agent (the `Schedules` object keyed by the agent's address holds
them all). Each fire is a delayed one-way send the object makes to itself; only the next
fire of a schedule is ever pending.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec


class Every(msgspec.Struct, frozen=True, tag="every"):
    """Fire every `seconds`, counted from when the schedule was made."""

    seconds: float


class Cron(msgspec.Struct, frozen=True, tag="cron"):
    """Fire when a five-field cron expression matches the wall clock of `zone`."""

    expression: str
    zone: str = "UTC"


class At(msgspec.Struct, frozen=True, tag="at"):
    """Fire once, at `at`; the schedule is removed once it fired."""

    at: datetime


When = Every | Cron | At
Busy = Literal["queue", "interrupt", "steer", "skip"]
"""What a fire does when the agent has a turn in progress: its message queues,
interrupts or steers as a message's `while_busy` does; or the fire is skipped, and the
agent records that it skipped."""


class ScheduleSpec(msgspec.Struct, frozen=True):
    text: str
    when: When
    while_busy: Busy = "queue"
    kind: str | None = None
    """A published kind, for an agent the first fire creates."""


class Schedule(msgspec.Struct, frozen=True):
    id: str
    spec: ScheduleSpec
    created: datetime
    next_at: datetime | None
    """The next planned fire; None once an `at` schedule fired."""
    fired: int = 0
    skipped: int = 0
    last_fired: datetime | None = None


class ScheduleList(msgspec.Struct, frozen=True):
    """An agent's schedules (also the object's state: `made` counts every schedule ever
    made, so an id is never reused)."""

    schedules: tuple[Schedule, ...] = ()
    made: int = 0


class ScheduleRef(msgspec.Struct, frozen=True):
    id: str


class Tick(msgspec.Struct, frozen=True):
    """A planned fire of schedule `id`: what the delayed send carries."""

    id: str
    planned: datetime
