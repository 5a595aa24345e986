"""Harnesses by name: what a spec's `harness` field names.

A harness is a pure generator of commands (`schemas.harness.Command`) that receives their
results and returns the `TurnState` to keep, as the built-in loop does; the driver runs
every one the same way, through the same pipeline, journal and timeline. The built-ins
are here; the composition root adds those of `TEASPILL_HARNESS_MODULES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from schemas.harness import Fail
from schemas.spec import COMPOSITION_HARNESS, DEFAULT_HARNESS
from services.harness.compose import run_composition
from services.harness.loop import Turn, TurnInput, run_turn
from services.harness.plan import plan_then_execute

Harness = Callable[[TurnInput], Turn]

BUILTIN_HARNESSES: Mapping[str, Harness] = {
    DEFAULT_HARNESS: run_turn,
    "plan": plan_then_execute,
    COMPOSITION_HARNESS: run_composition,
}


def start(harnesses: Mapping[str, Harness], given: TurnInput) -> Turn:
    """The turn of the harness `given`'s spec names; one that fails with a sentence when
    this deployment has no harness of that name (a module taken away since the publish).
    A spec with a composition is run by the composition harness."""
    spec = given.turn.spec
    name = COMPOSITION_HARNESS if spec.composition is not None else spec.harness
    harness = harnesses.get(name)
    if harness is None:
        return _unknown(given, harnesses)
    return harness(dataclasses.replace(given, harnesses=harnesses))


def _unknown(given: TurnInput, harnesses: Mapping[str, Harness]) -> Turn:
    offered = ", ".join(sorted(harnesses))
    spec = given.turn.spec
    name = COMPOSITION_HARNESS if spec.composition is not None else spec.harness
    yield Fail(f"This deployment has no harness {name!r} to run the turn; it offers: {offered}.")
    return given.turn
