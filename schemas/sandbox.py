"""What an agent's spec says about its workspace: quota, network and command limits.

Kept apart from `schemas.workspace` so that `schemas.spec` can hold it without a cycle.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Seconds = Annotated[float, msgspec.Meta(gt=0, le=600)]
"""Up to 10 minutes: the `Workspace` service's timeout is above the longest command."""
LimitName = Literal["wall time", "cpu time", "memory", "processes", "output", "quota"]


class CommandLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one command may use before it is killed with its whole process tree."""

    wall_seconds: Seconds = 60
    """Seconds from start to end, waiting included."""
    cpu_seconds: Seconds = 30
    """CPU seconds, summed over every process of the command."""
    memory_mb: Annotated[int, msgspec.Meta(ge=16, le=65536)] = 512
    """Resident memory, summed over every process of the command."""
    processes: Annotated[int, msgspec.Meta(ge=4, le=4096)] = 64
    """Processes (and threads) alive at once."""
    output_bytes: Annotated[int, msgspec.Meta(ge=1, le=1_000_000_000)] = 1_000_000
    """Bytes written to stdout and stderr together."""


class WorkspaceSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `workspace` table of a spec."""

    quota_mb: Annotated[int, msgspec.Meta(ge=1)] = 256
    """The most the workspace's files may hold."""
    network: bool = False
    """Whether commands may use the network (the host's, loopback included)."""
    lend_to_children: bool = False
    """Whether children this agent spawns see its workspace, read-only, at /parent."""
    limits: CommandLimits = CommandLimits()
