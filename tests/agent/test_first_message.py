"""A spawn's first message: the child works for the end user its parent's turn works for."""

from __future__ import annotations

from schemas.chat import ChatMessage, ToolCall
from schemas.harness import Spawn, TurnState
from schemas.spec import AgentSpec, MemorySettings
from schemas.wake import ParentRef
from services.agent.grants import first_message, tenant_writes

SPEC = AgentSpec(kind="helper", instructions="Help.", model="script", can_spawn=True)
CALL = ToolCall("call_0", "spawn_agent", {"task": "look it up"})


def spawned_by(turn: TurnState) -> str:
    spawn = Spawn(CALL, "acme.u-1.t1r1c0", "look it up", 1, SPEC)
    return first_message(spawn, ParentRef("acme.u-1", 1, "call_0"), turn).user


def test_a_child_carries_its_parents_end_user_and_none_when_there_is_none() -> None:
    asked = (ChatMessage(role="user", content="hi"),)
    assert spawned_by(TurnState(1, SPEC, asked, user="U")) == "U"
    assert spawned_by(TurnState(1, SPEC, asked)) == ""


def test_tenant_writes_are_a_users_turn_only_when_the_spec_allows() -> None:
    asked = (ChatMessage(role="user", content="hi"),)
    assert tenant_writes(TurnState(1, SPEC, asked))
    assert not tenant_writes(TurnState(1, SPEC, asked, user="U"))
    opened = AgentSpec(
        kind="helper", instructions="Help.", memory=MemorySettings(tenant_writes=True)
    )
    assert tenant_writes(TurnState(1, opened, asked, user="U"))
