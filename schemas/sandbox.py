"""What an agent's spec says about its workspace: quota, network and command limits.

Kept apart from `schemas.workspace` so that `schemas.spec` can hold it without a cycle.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

Seconds = Annotated[float, msgspec.Meta(gt=0, le=600)]
"""Up to 10 minutes: the `Workspace` service's timeout is above the longest command."""
LimitName = Literal[
    "wall time", "cpu time", "memory", "processes", "output", "quota", "disk reserve"
]


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
    """Whether commands get outbound network (never the host's loopback, link-local or
    private addresses); honoured only for tenants the operator grants it."""
    lend_to_children: bool = False
    """Whether children this agent spawns see its workspace, read-only, at /parent."""
    limits: CommandLimits = CommandLimits()


class Ceilings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The operator's ceilings on what a spec's workspace may ask for; a spec above one is
    refused when it is published (and a command above one is refused when it runs)."""

    quota_mb: int = 1024
    wall_seconds: float = 600
    cpu_seconds: float = 300
    memory_mb: int = 2048
    processes: int = 256
    output_bytes: int = 100_000_000


class SandboxPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the operator allows workspaces: who may have the network, and the ceilings."""

    network_tenants: frozenset[str] = frozenset()
    """Tenants whose specs may turn `workspace.network` on."""
    ceilings: Ceilings = Ceilings()


def workspace_refusal(workspace: WorkspaceSettings, tenant: str, policy: SandboxPolicy) -> str:
    """Why the operator's policy refuses `workspace` for `tenant`; empty when it does not."""
    if workspace.network and tenant not in policy.network_tenants:
        return (
            f"field 'workspace.network' is true, but the operator has not granted the network "
            f"to tenant {tenant!r}: commands of its agents run without it. Leave "
            "workspace.network out, or ask the operator to add the tenant to "
            "TEASPILL_NETWORK_TENANTS."
        )
    ceilings = policy.ceilings
    asked = [("quota_mb", workspace.quota_mb, ceilings.quota_mb)]
    limits = workspace.limits
    asked += [
        (f"limits.{name}", getattr(limits, name), getattr(ceilings, name))
        for name in ("wall_seconds", "cpu_seconds", "memory_mb", "processes", "output_bytes")
    ]
    for name, value, ceiling in asked:
        if value > ceiling:
            return (
                f"field 'workspace.{name}' is {value:g}, above this deployment's ceiling of "
                f"{ceiling:g} (TEASPILL_WORKSPACE_MAX_{name.split('.')[-1].upper()})."
            )
    return ""


@dataclass(frozen=True)
class Allowed:
    """One exception to the blocked ranges: a network, and a port or every port."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    port: int | None = None


def parse_allowed(entry: str) -> Allowed:
    """`10.1.2.0/24`, `10.1.2.3`, `10.1.2.3:443` or `[fd00::1]:80`; raises ValueError with
    a sentence for anything else."""
    host, port = entry.strip(), None
    if host.startswith("["):
        host, closed, rest = host[1:].partition("]")
        port = rest.removeprefix(":") if closed else "-"
        port = port or None
    elif host.count(":") == 1:
        host, port = host.split(":")
    try:
        network = ipaddress.ip_network(host, strict=False)
        number = int(port) if port is not None else None
    except ValueError:
        number, network = -1, None
    if network is None or (number is not None and not 0 < number < 65536):
        raise ValueError(
            f"{entry!r} is not an address, a CIDR or address:port (such as 10.1.2.0/24, "
            "10.1.2.3:443 or [fd00::1]:80)"
        )
    return Allowed(network, number)
