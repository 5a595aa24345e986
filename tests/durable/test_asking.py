"""`ask_user` on a real stack: a question the model shaped badly is a refused call the
model reads, and the turn goes on; it never wedges the agent."""

from __future__ import annotations

import pytest

from schemas.events import ToolFinished, TurnEnded
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.executor.scripted import script
from tests.durable.conftest import LiveStack

pytestmark = pytest.mark.durable

SPEC = AgentSpec(kind="asker", instructions="Ask.", model="script", tools={"ask_user": "allow"})


def test_a_form_with_a_list_type_is_refused_and_the_turn_ends(
    stack: LiveStack, address: str
) -> None:
    form = {"properties": {"when": {"type": ["string", "null"]}}}
    text = script(
        {"calls": [{"name": "ask_user", "arguments": {"question": "When?", "form": form}}]},
        {"reply": "{results}"},
    )
    stack.ingress.send_message(address, Message(text, spec=SPEC))

    ended = stack.wait_for_turn_end(address, 1, timeout=60)

    assert ended.outcome == "succeeded"
    finished = [e.body for e in stack.events(address) if isinstance(e.body, ToolFinished)]
    assert [(f.name, f.status) for f in finished] == [("ask_user", "error")]
    assert "ask_user takes `form`" in finished[0].content
    stack.ingress.message(address, script({"reply": "still here"}))
    assert isinstance(stack.events(address)[-1].body, TurnEnded)
