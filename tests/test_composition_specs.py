"""A spec's composition is checked as it is published: kind names, picks among the listed
kinds, and a turn that fits the spec's bounds."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.compose import Branch, Parallel, Router, Rule, Sequential
from services.specs import SpecError, parse_spec


def spec(composition: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"kind": "composer", "instructions": "Compose.", "composition": composition, **more}


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as error:
        parse_spec(raw, "The published spec")
    return error.value.problem


def test_each_pattern_decodes_from_plain_data() -> None:
    assert parse_spec(spec({"type": "sequential", "stages": ["a", "b"]}), "s").composition == (
        Sequential(("a", "b"))
    )
    parallel = {"type": "parallel", "branches": [{"kind": "a"}, {"kind": "b", "input": "x"}]}
    assert parse_spec(spec(parallel), "s").composition == Parallel((Branch("a"), Branch("b", "x")))
    router = {"type": "router", "kinds": ["a", "b"], "pick": "rules",
              "rules": [{"contains": "bill", "kind": "a"}], "default": "b"}  # fmt: skip
    assert parse_spec(spec(router), "s").composition == Router(
        ("a", "b"), "rules", (Rule("bill", "a"),), "b"
    )


def test_a_composition_past_its_budget_is_refused_with_a_sentence() -> None:
    branches = [{"kind": f"k{i}"} for i in range(9)]
    said = refused(spec({"type": "parallel", "branches": branches, "merge": "m"}))
    assert said == (
        "field 'composition' starts up to 10 agents a turn, past its limits.max_children of 8: "
        "raise the limit or start fewer stages."
    )
    loop = spec({"type": "loop", "stage": "a", "max_passes": 5}, limits={"max_descendants": 4})
    assert "past its limits.max_descendants of 4" in refused(loop)
    deep = spec({"type": "sequential", "stages": ["a"]}, limits={"max_depth": 0})
    assert "limits.max_depth is 0: it must be at least 1" in refused(deep)


def test_a_router_may_pick_only_a_kind_it_lists() -> None:
    router = {"type": "router", "kinds": ["a", "b"], "rules": [{"contains": "x", "kind": "c"}],
              "default": "d"}  # fmt: skip
    said = refused(spec(router))
    assert said.startswith("2 problems. (1) field 'composition' picks 'c', which its kinds (a, b)")
    assert "(2) field 'composition' picks 'd'" in said


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (spec({"type": "sequential", "stages": []}), "a sequential needs a stage"),
        (spec({"type": "parallel", "branches": []}), "a parallel needs a branch"),
        (spec({"type": "loop", "stage": "a", "max_passes": 0}), "max_passes' is 0"),
        (spec({"type": "handoff", "kinds": []}), "list the kinds it may pick"),
        (spec({"type": "router", "kinds": ["a"], "pick": "rules"}), "has no rules and no default"),
        (spec({"type": "sequential", "stages": ["no spaces"]}), "names 'no spaces', which is not"),
        (spec({"type": "sequential", "stages": ["a"]}, harness="plan"), "cannot run a composition"),
        ({"kind": "k", "instructions": "x", "harness": "composition"}, "has no composition"),
        (spec({"type": "fanout"}), "composition"),
    ],
)
def test_a_composition_that_cannot_run_is_refused(raw: dict[str, Any], says: str) -> None:
    assert says in refused(raw)
