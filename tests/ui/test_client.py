"""The Python client follows a turn across a gateway killed (SIGKILL) and restarted, and
yields every recorded event exactly once, in seq order."""

from __future__ import annotations

import threading

import pytest

from schemas.events import Event, TurnEnded
from services.client import Item, until_turn_ends
from services.executor.scripted import script
from tests.ui.conftest import UiStack

pytestmark = pytest.mark.durable


def test_follow_survives_a_killed_gateway(ui_stack: UiStack) -> None:
    address = "acme.client-follow"
    slow = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"sleep": 6, "reply": "It is {results}"},
    )
    seen: list[Item] = []
    with ui_stack.client("read") as reader, ui_stack.client("write") as writer:
        sent = writer.send(address, slow, kind="script")
        tool_done = threading.Event()

        def follow() -> None:
            for item in until_turn_ends(reader.follow(address, after=sent.after_seq)):
                seen.append(item)
                if isinstance(item, Event) and item.body.__struct_config__.tag == "tool_finished":
                    tool_done.set()

        follower = threading.Thread(target=follow)
        follower.start()
        assert tool_done.wait(60), "the tool call never showed"
        ui_stack.gateway.kill()
        ui_stack.gateway.start()
        follower.join(120)
        assert not follower.is_alive(), "the follower never saw the turn end"
        recorded = list(writer.events(address))
    events = [item for item in seen if isinstance(item, Event)]
    assert events == recorded
    assert [e.seq for e in events] == list(range(1, len(recorded) + 1))
    assert isinstance(events[-1].body, TurnEnded)
    assert events[-1].body.reply == "It is 42"
