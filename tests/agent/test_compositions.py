"""Compositions run whole, in process: the composing agent and its stages are real wakes
of the driver on the in-memory context (as in tests/agent/test_driver.py); each stage is
a published kind run by the `script` model, and each report is delivered as a wake."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from schemas.compose import Branch, Composition, Handoff, Loop, Parallel, Router, Rule, Sequential
from schemas.events import ChildSpawned, HandedOff, ModelMessage, TurnEnded, TurnStarted
from schemas.spec import AgentSpec, Limits
from schemas.wake import Message
from services.executor.scripted import script
from tests.agent.test_driver import ME, Agents, ScriptModel

pytestmark = pytest.mark.anyio

KINDS = ("draft", "edit", "polish", "fr", "de", "merge", "billing", "support", "critic")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    agents = Agents(tmp_path)
    for kind in KINDS:
        agents.published[kind] = AgentSpec(kind, f"You are {kind}.", model="script", version=1)
    return agents


def composing(composition: Composition, **limits: int) -> AgentSpec:
    return AgentSpec(
        "composer",
        "Compose.",
        model="script",
        composition=composition,
        limits=Limits(**limits),
    )


async def run(agents: Agents, text: str, spec: AgentSpec) -> TurnEnded:
    await agents.wake(ME, Message(text, spec=spec))
    await agents.deliver()
    (ended,) = agents.bodies(ME, TurnEnded)
    assert isinstance(ended, TurnEnded)
    return ended


def stages(agents: Agents) -> list[tuple[str, str]]:
    return [(s.stage, s.kind) for s in agents.bodies(ME, ChildSpawned)]


def ran(agents: Agents, child: str) -> list[str]:
    return [s.spec_kind for s in agents.bodies(child, TurnStarted)]


async def test_sequential_stages_run_in_order_each_on_the_last_ones_reply(agents: Agents) -> None:
    ended = await run(agents, "hi", composing(Sequential(("draft", "edit", "polish"))))
    assert ended.outcome == "succeeded"
    assert ended.reply == "You said: You said: You said: hi"
    assert stages(agents) == [("stage 1: draft", "draft"), ("stage 2: edit", "edit"),
                              ("stage 3: polish", "polish")]  # fmt: skip
    children = [s.child for s in agents.bodies(ME, ChildSpawned)]
    assert children == [f"{ME}.t1r1c0", f"{ME}.t1r2c0", f"{ME}.t1r3c0"]
    assert [ran(agents, child) for child in children] == [["draft"], ["edit"], ["polish"]]
    assert [s.parent for c in children for s in agents.bodies(c, TurnStarted)] == [ME] * 3
    assert agents.bodies(ME, ModelMessage) == [], "the composition itself calls no model"


async def test_parallel_branches_merge_by_a_named_kind(agents: Agents) -> None:
    branches = (Branch("fr", "{input} in French"), Branch("de", "{input} in German"))
    ended = await run(agents, "hello", composing(Parallel(branches, merge="merge")))
    assert ended.reply == "You said: You said: hello in French\n\nYou said: hello in German"
    assert stages(agents) == [("branch 1: fr", "fr"), ("branch 2: de", "de"),
                              ("merge: merge", "merge")]  # fmt: skip


async def test_parallel_branches_merge_by_concatenation_in_branch_order(agents: Agents) -> None:
    branches = (Branch("fr"), Branch("de"), Branch("fr", "again: {input}"))
    ended = await run(agents, "x", composing(Parallel(branches, separator=" | ")))
    assert ended.reply == "You said: x | You said: x | You said: again: x"
    assert [s.child for s in agents.bodies(ME, ChildSpawned)] == [
        f"{ME}.t1r1c0", f"{ME}.t1r1c1", f"{ME}.t1r1c2"
    ]  # fmt: skip


ROUTER = Router(("billing", "support"), pick="rules", rules=(Rule("invoice", "billing"),),
                default="support")  # fmt: skip


@pytest.mark.parametrize(("text", "kind"), [("My INVOICE is wrong", "billing"), ("hi", "support")])
async def test_a_router_by_rule_sends_the_message_to_one_listed_kind(
    agents: Agents, text: str, kind: str
) -> None:
    ended = await run(agents, text, composing(ROUTER))
    assert ended.reply == f"You said: {text}"
    assert stages(agents) == [(f"route: {kind}", kind)]


async def test_a_router_by_model_takes_the_listed_kind_the_model_names(agents: Agents) -> None:
    router = Router(("billing", "support"))
    text = script({"reply": "I would say support."})
    ended = await run(agents, text, composing(router))
    assert ended.outcome == "succeeded"
    assert stages(agents) == [("route: support", "support")]
    (picked,) = agents.bodies(ME, ModelMessage)
    assert picked.text == "I would say support."


async def test_a_router_never_reaches_a_kind_it_does_not_list(agents: Agents) -> None:
    router = Router(("billing", "support"))
    ended = await run(agents, script({"reply": "critic"}), composing(router))
    assert ended.outcome == "failed"
    assert ended.reason == (
        "The router's model answered 'critic', which names none of its kinds (billing, "
        "support), and it has no default kind."
    )
    assert agents.bodies(ME, ChildSpawned) == []
    assert sorted(agents.states) == [ME], "no other agent came into being"


async def test_a_loop_repeats_its_stage_until_the_reply_meets_the_condition(
    agents: Agents,
) -> None:
    loop = Loop("critic", max_passes=5, until="You said: You said:")
    ended = await run(agents, "go", composing(loop))
    assert ended.reply == "You said: You said: go"
    assert stages(agents) == [("pass 1: critic", "critic"), ("pass 2: critic", "critic")]


async def test_a_loop_stops_at_its_bound(agents: Agents) -> None:
    ended = await run(agents, "go", composing(Loop("critic", max_passes=3, until="never")))
    assert ended.reply == "You said: You said: You said: go"
    assert len(stages(agents)) == 3


async def test_a_handoff_answers_as_the_new_kind_and_the_next_message_goes_to_it(
    agents: Agents,
) -> None:
    front = composing(Handoff(("billing", "support"), pick="rules", default="support",
                              rules=(Rule("invoice", "billing"),)))  # fmt: skip
    first = await agents.wake(ME, Message("about my invoice", spec=front))
    assert first.reply == "You said: about my invoice"
    (handed,) = agents.bodies(ME, HandedOff)
    assert (handed.from_kind, handed.kind, handed.version) == ("composer", "billing", 1)
    second = await agents.wake(ME, Message("and again"))
    assert second.reply == "You said: and again"
    started = agents.bodies(ME, TurnStarted)
    assert [s.spec_kind for s in started] == ["composer", "billing"]
    assert agents.asked == ["billing", "billing"]
    assert agents.bodies(ME, ChildSpawned) == [], "a handoff starts no child"


async def test_a_stage_that_fails_fails_the_composition_with_its_sentence(agents: Agents) -> None:
    ended = await run(agents, "hi", composing(Sequential(("draft", "ghost", "polish"))))
    assert ended.outcome == "failed"
    assert ended.reason == (
        f"The stage {ME}.t1r2c0 ended failed: No spec of kind 'ghost' is published for "
        "tenant 'acme'."
    )
    assert [s for s, _ in stages(agents)] == ["stage 1: draft", "stage 2: ghost"]


async def test_a_composition_past_its_bounds_starts_no_stage_beyond_them(agents: Agents) -> None:
    branches = tuple(Branch(kind) for kind in ("fr", "de", "fr"))
    ended = await run(agents, "x", composing(Parallel(branches), max_children=2))
    assert ended.reason == (
        "The composition cannot start its next stage: The turn would start 3 agents, past "
        "its limit of 2 (limits.max_children)."
    )
    assert agents.bodies(ME, ChildSpawned) == []
    deep = msgspec.structs.replace(composing(Sequential(("draft",))), limits=Limits(max_depth=0))
    agents.states.clear()
    agents.projection.batches.clear()
    ended = await run(agents, "x", deep)
    assert ended.reason == (
        "The composition cannot start its next stage: Helpers may not be nested deeper than 0 "
        "levels."
    )


async def test_a_composition_counts_its_stages_tokens_against_its_token_budget(
    agents: Agents,
) -> None:
    spec = composing(Sequential(("draft", "edit", "polish")), max_turn_tokens=3)
    ended = await run(agents, "hi there", spec)
    assert ended.outcome == "failed"
    assert ended.reason.startswith("The composition reached its limit of 3 model tokens")
    assert [s for s, _ in stages(agents)] == ["stage 1: draft"]
    assert ended.usage.prompt_tokens + ended.usage.completion_tokens >= 3


async def test_a_message_that_would_steer_a_composition_queues_behind_it(
    agents: Agents,
) -> None:
    """A composition's turn reads no messages but its input: one that asks to steer it
    runs as the next turn, with the spec's composition again."""
    await agents.wake(ME, Message("first", spec=composing(Sequential(("draft",)))))
    assert (await agents.wake(ME, Message("second", while_busy="steer"))).status.queued == 1
    await agents.deliver()
    ended = agents.bodies(ME, TurnEnded)
    assert [e.reply for e in ended] == ["You said: first", "You said: second"]


async def test_a_handoff_to_a_kind_that_is_not_published_fails_with_a_sentence(
    agents: Agents,
) -> None:
    handoff = Handoff(("billing", "ghost"), pick="rules", default="ghost")
    ended = await run(agents, "hi", composing(handoff))
    assert ended.outcome == "failed"
    assert ended.reason == "No spec of kind 'ghost' is published for tenant 'acme'."
    assert agents.bodies(ME, HandedOff) == []


async def test_each_stage_gets_a_share_of_the_compositions_token_budget(agents: Agents) -> None:
    """Two branches share the composition's 40 tokens: each turn stops at 20, so the tree
    stays within its root's limit (a call may end a little past it, as any turn's)."""
    rounds = script(*[{"calls": [{"name": "calculator"}]}] * 5, {"reply": "done"})
    spec = composing(Parallel((Branch("fr", rounds), Branch("de", rounds))), max_turn_tokens=40)
    ended = await run(agents, "x", spec)
    assert ended.outcome == "failed"
    children = [s.child for s in agents.bodies(ME, ChildSpawned)]
    for child in children:
        (stage_end,) = agents.bodies(child, TurnEnded)
        assert stage_end.reason.startswith(
            "The turn reached its limit of 20 model tokens (its share of its composition's)"
        )
        used = stage_end.usage.prompt_tokens + stage_end.usage.completion_tokens
        assert used >= 20
        assert len(agents.bodies(child, ModelMessage)) < 6, "stopped before its script's end"
    assert ended.reason.startswith(f"The stage {children[0]} ended failed: The turn reached")


async def test_a_stage_cannot_nest_deeper_than_its_root_allows_whatever_its_own_spec_says(
    agents: Agents,
) -> None:
    agents.published["deep"] = AgentSpec(
        "deep", "Delegate.", model="script", can_spawn=True, limits=Limits(max_depth=5), version=1
    )
    spawn = {"name": "spawn_agent", "arguments": {"task": script({"reply": "leaf"})}}
    text = script({"calls": [spawn]}, {"reply": "{results}"})
    ended = await run(agents, text, composing(Sequential(("deep",)), max_depth=1))
    assert ended.reply == "Helpers may not be nested deeper than 1 levels."
    assert sorted(agents.states) == [ME, f"{ME}.t1r1c0"], "the stage made no helper"


async def test_a_handed_off_turn_that_is_stopped_still_leaves_the_agent_to_the_new_kind(
    tmp_path: Path,
) -> None:
    agents = Agents(tmp_path, ScriptModel(stop_at=1))
    agents.published["billing"] = AgentSpec("billing", "Bills.", model="script", version=1)
    front = composing(Handoff(("billing",), pick="rules", default="billing"))
    await agents.wake(ME, Message("hi", spec=front))
    assert [e.outcome for e in agents.bodies(ME, TurnEnded)] == ["stopped"]
    assert len(agents.bodies(ME, HandedOff)) == 1
    agents.model.stop_at = 0
    await agents.wake(ME, Message("again"))
    assert [s.spec_kind for s in agents.bodies(ME, TurnStarted)] == ["composer", "billing"]
