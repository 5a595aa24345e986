"""The console draws a composition as a tree, in headless Chromium on a real stack: the
composing agent's turn lists its stages by name with their kinds and addresses, each a
link to the child, whose page names its parent."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from schemas.events import Event, TurnEnded
from services.client import until_turn_ends
from tests.ui.conftest import UiStack
from tests.ui.test_browser import (  # noqa: F401 - the fixtures
    Watched,
    browser,
    fresh,
    open_agent,
    row,
    shots,
    sign_in,
    watched,
)

pytestmark = pytest.mark.durable

STAGES = ("ui-draft", "ui-edit")


def test_a_sequential_composition_shows_as_a_tree_of_its_stages(
    ui_stack: UiStack,
    watched: Watched,  # noqa: F811 - the fixture imported above
) -> None:
    address = fresh("composed")
    with ui_stack.client() as api:
        for kind in STAGES:
            api.publish({"kind": kind, "instructions": f"You are {kind}.", "model": "script"})
        composition = {"type": "sequential", "stages": list(STAGES)}
        api.publish({"kind": "ui-pipeline", "instructions": "Compose.", "composition": composition})
        sent = api.send(address, "hello", kind="ui-pipeline")
        items = list(until_turn_ends(api.follow(address, after=sent.after_seq)))
    ended = items[-1]
    assert isinstance(ended, Event)
    assert isinstance(ended.body, TurnEnded)
    assert ended.body.reply == "You said: You said: hello"
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    tree = watched.page.get_by_role("list", name="children")
    expect(tree.get_by_role("listitem")).to_have_count(2)
    expect(tree.get_by_role("listitem").nth(0)).to_contain_text("stage 1: ui-draft")
    expect(tree.get_by_role("listitem").nth(1)).to_contain_text(f"{address}.t1r2c0 (ui-edit)")
    expect(row(watched, "runs ui-edit")).to_contain_text(f"stage 2: ui-edit{address}.t1r2c0")
    watched.shot("composition")
    tree.get_by_role("link", name=f"{address}.t1r1c0").click()
    expect(watched.page.get_by_role("heading", name=f"{address}.t1r1c0")).to_be_visible()
    expect(row(watched, "hello from")).to_contain_text(f"from {address}")
    assert watched.errors == []
