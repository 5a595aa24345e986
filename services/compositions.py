"""A spec's composition checked as it is published (`services.specs` calls it): the kinds
it names are kind names, a router's or a handoff's rules and default name listed kinds,
and one turn of it fits the spec's own bounds (children per turn, agents per message,
depth), so a composition past its budget is refused with a sentence, not failed later."""

from __future__ import annotations

import re
from collections.abc import Callable

from schemas.compose import Handoff, Loop, Parallel, Router, Sequential, children_of, kinds_of
from schemas.spec import COMPOSITION_HARNESS, DEFAULT_HARNESS, KIND_PATTERN, AgentSpec

Add = Callable[[str, str], None]
"""Adds a problem: its sentence and the field at fault."""


def check_composition(spec: AgentSpec, add: Add) -> None:
    composition = spec.composition
    if composition is None:
        if spec.harness == COMPOSITION_HARNESS:
            add("field 'harness' is 'composition', but the spec has no composition.", "harness")
        return
    if spec.harness not in (DEFAULT_HARNESS, COMPOSITION_HARNESS):
        add(
            f"field 'harness' ({spec.harness!r}) cannot run a composition: a spec with a "
            "composition is run by the composition harness. Leave harness out.",
            "harness",
        )
    for kind in kinds_of(composition):
        if not re.fullmatch(KIND_PATTERN, kind):
            add(
                f"field 'composition' names {kind!r}, which is not a kind (1 to 48 of "
                "A-Z a-z 0-9 - _).",
                "composition",
            )
    _shape(composition, add)
    _bounds(spec, add)


def _shape(composition: object, add: Add) -> None:
    match composition:
        case Sequential(stages=()):
            add("field 'composition.stages' is empty: a sequential needs a stage.", "composition")
        case Parallel(branches=()):
            add("field 'composition.branches' is empty: a parallel needs a branch.", "composition")
        case Loop(max_passes=passes) if passes < 1:
            add(f"field 'composition.max_passes' is {passes}; it must be 1 or more.", "composition")
        case Router() | Handoff():
            _picks(composition, add)


def _picks(composition: Router | Handoff, add: Add) -> None:
    listed = composition.kinds
    if not listed:
        add("field 'composition.kinds' is empty: list the kinds it may pick.", "composition")
        return
    named = [rule.kind for rule in composition.rules]
    if composition.default:
        named.append(composition.default)
    for kind in dict.fromkeys(named):
        if kind not in listed:
            add(
                f"field 'composition' picks {kind!r}, which its kinds ({', '.join(listed)}) do "
                "not list: it may pick only a listed kind.",
                "composition",
            )
    if composition.pick == "rules" and not composition.rules and not composition.default:
        add("field 'composition' picks by rules but has no rules and no default.", "composition")


def _bounds(spec: AgentSpec, add: Add) -> None:
    assert spec.composition is not None
    needed, limits = children_of(spec.composition), spec.limits
    for limit, name in (
        (limits.max_children, "max_children"),
        (limits.max_descendants, "max_descendants"),
    ):
        if needed > limit:
            add(
                f"field 'composition' starts up to {needed} agents a turn, past its "
                f"limits.{name} of {limit}: raise the limit or start fewer stages.",
                "composition",
            )
    if needed and limits.max_depth < 1:
        add(
            "field 'composition': its stages are children of the agent, and limits.max_depth "
            "is 0: it must be at least 1.",
            "composition",
        )
