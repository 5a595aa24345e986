"""What the projector tells gateways after a commit: which agents' timelines grew.

A hint, never data: a gateway that receives it reads the events from the projection, so a
lost, repeated or reordered notice costs latency at most, never an event.
"""

from __future__ import annotations

import msgspec


class Projected(msgspec.Struct, frozen=True):
    agent: str
    last_seq: int
    """The newest seq of the agent in the commit (the projection may still have gaps)."""


class ProjectedBatch(msgspec.Struct, frozen=True):
    agents: tuple[Projected, ...]
