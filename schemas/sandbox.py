"""What an agent's spec says about its workspace: quota, network and command limits.

Kept apart from `schemas.workspace` so that `schemas.spec` can hold it without a cycle.
"""

from __future__ import annotations

from typing import Literal

import msgspec

LimitName = Literal["wall time", "cpu time", "memory", "processes", "output", "quota"]


class CommandLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one command may use before it is killed with its whole process tree."""

    wall_seconds: float = 60
    """Seconds from start to end, waiting included."""
    cpu_seconds: float = 30
    """CPU seconds, summed over every process of the command."""
    memory_mb: int = 512
    """Resident memory, summed over every process of the command."""
    processes: int = 64
    """Processes (and threads) alive at once."""
    output_bytes: int = 1_000_000
    """Bytes written to stdout and stderr together."""


class WorkspaceSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `workspace` table of a spec."""

    quota_mb: int = 256
    """The most the workspace's files may hold."""
    network: bool = False
    """Whether commands may use the network (the host's, loopback included)."""
    lend_to_children: bool = False
    """Whether children this agent spawns see its workspace, read-only, at /parent."""
    limits: CommandLimits = CommandLimits()
