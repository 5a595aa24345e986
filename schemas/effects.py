"""What the effect ledger keeps for a side-effecting call: started, and once finished,
its result."""

from __future__ import annotations

import msgspec

from schemas.harness import Artifact, ToolResult


class Finished(msgspec.Struct, frozen=True):
    """A side-effecting call's result, as a retry gets it back."""

    result: ToolResult
    artifacts: tuple[Artifact, ...] = ()
    """Files the call created or changed (workspace commands)."""


class Begin(msgspec.Struct, frozen=True):
    """The input of `Effects.begin`: the agent whose call it is (the idempotency key's
    first part), kept beside the entry so an erasure finds it in Restate by its agent."""

    owner: str = ""


class Effect(msgspec.Struct, frozen=True):
    """One key's entry: present once the call started; `finished` once it returned."""

    finished: Finished | None = None


class Claim(msgspec.Struct, frozen=True):
    """The ledger's answer to `begin`: whether this attempt is the first for its key."""

    first: bool
    finished: Finished | None = None
    """The result of an earlier attempt that finished, if one did; None with `first`
    False means an earlier attempt started and was interrupted: its outcome is unknown."""


def leg_key(idempotency_key: str, leg: int) -> str:
    """The key of a call sent again with a person's answer to what its `leg`-th send asked
    (an MCP server's "input required"): each answered leg is a send of its own."""
    return f"{idempotency_key}/input{leg}"
