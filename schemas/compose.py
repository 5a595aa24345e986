"""Compositions: multi-agent patterns written as data in a spec (`AgentSpec.composition`).

Each stage is an agent kind the tenant publishes, run as a child of the composing agent:
spawned with a one-way send, reporting back as a wake. A composition is one of the tagged
Structs below (`type = "sequential"` and so on in a spec file).
"""

from __future__ import annotations

from typing import Literal

import msgspec

INPUT = "{input}"
"""In a branch's `input`: replaced by the composition's input (the message)."""

Pick = Literal["rules", "model"]
"""How a router or a handoff picks its kind: `rules`, the first rule whose text the
message contains (else `default`); `model`, a model call shown the listed kinds (an
answer naming none of them takes `default`, else the turn fails)."""


class Branch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    kind: str
    input: str = INPUT
    """What the branch is sent: `{input}` is the composition's input."""


class Rule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    contains: str
    """Matched against the message, ignoring case."""
    kind: str


class Sequential(msgspec.Struct, frozen=True, tag="sequential", forbid_unknown_fields=True):
    """Each stage's reply is the next one's input; the last stage's reply is the reply."""

    stages: tuple[str, ...]


class Parallel(msgspec.Struct, frozen=True, tag="parallel", forbid_unknown_fields=True):
    """Every branch at once; their replies, in branch order, joined by `separator` are the
    reply, or the input of the `merge` kind, whose reply is."""

    branches: tuple[Branch, ...]
    merge: str = ""
    separator: str = "\n\n"


class Router(msgspec.Struct, frozen=True, tag="router", forbid_unknown_fields=True):
    """One of `kinds` answers the message; never a kind not listed."""

    kinds: tuple[str, ...]
    pick: Pick = "model"
    rules: tuple[Rule, ...] = ()
    default: str = ""


class Loop(msgspec.Struct, frozen=True, tag="loop", forbid_unknown_fields=True):
    """The stage runs again on its own reply until the reply contains `until` or it ran
    `max_passes` times; its last reply is the reply."""

    stage: str
    max_passes: int = 3
    until: str = ""


class Handoff(msgspec.Struct, frozen=True, tag="handoff", forbid_unknown_fields=True):
    """One of `kinds` takes over the agent: it answers this message, and the agent's next
    messages go to it."""

    kinds: tuple[str, ...]
    pick: Pick = "model"
    rules: tuple[Rule, ...] = ()
    default: str = ""


Composition = Sequential | Parallel | Router | Loop | Handoff


def kinds_of(composition: Composition) -> tuple[str, ...]:
    """Every kind the composition names, in order, each once."""
    match composition:
        case Sequential(stages=stages):
            named: tuple[str, ...] = stages
        case Parallel(branches=branches, merge=merge):
            named = (*(b.kind for b in branches), *((merge,) if merge else ()))
        case Loop(stage=stage):
            named = (stage,)
        case Router() | Handoff():
            named = composition.kinds
    return tuple(dict.fromkeys(named))


def children_of(composition: Composition) -> int:
    """The most children one turn of the composition starts."""
    match composition:
        case Sequential(stages=stages):
            return len(stages)
        case Parallel(branches=branches, merge=merge):
            return len(branches) + (1 if merge else 0)
        case Loop(max_passes=passes):
            return passes
        case Router():
            return 1
        case Handoff():
            return 0
