"""The console answers a question in headless Chromium, on a real stack: a tool's (an MCP
server's input-required result, with the test's own MCP server): the question and its form
are shown, a missing answer gets the gateway's sentence, and the filled form resumes the
call; and the model's own (`ask_user`): the question and its choices are shown, and the
chosen one is the call's result."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from schemas.events import ToolFinished, TurnEnded
from services.executor.scripted import script
from tests.durable.test_mcp_input import Shop, shop
from tests.ui.conftest import UiStack
from tests.ui.test_browser import (
    WAIT,
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
__all__ = ["browser", "shop", "shots", "watched"]  # the fixtures this module uses from others
ASK = {"question": "Which colour?", "choices": ["red", "blue"]}


@pytest.fixture
def page(browser: Browser, shots: object) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    opened = context.new_page()
    opened.set_default_timeout(WAIT)
    yield Watched(opened, shots)  # type: ignore[arg-type]
    context.close()


def test_the_console_shows_the_question_and_answers_it_with_its_form(
    shop: Shop, page: Watched
) -> None:
    address = "acme.input-console"
    shop.send(address)
    url = str(shop.http.base_url).rstrip("/")
    page.page.goto(f"{url}/")
    page.page.locator("#key").fill(shop.key)
    page.page.keyboard.press("Enter")
    expect(page.page.get_by_role("heading", name="Agents")).to_be_visible()
    page.page.goto(f"{url}/#/agents/{address}")
    expect(page.page.get_by_text("How many tea should be ordered?")).to_be_visible()
    page.shot("question")
    page.page.get_by_role("button", name="Approve").click()
    refused = page.page.locator(".bad", has_text="The answer to 'quantity' is missing 'quantity'.")
    expect(refused).to_be_visible()
    page.page.get_by_label("quantity quantity").fill("4")
    page.page.get_by_label("quantity gift").check()
    page.page.get_by_role("button", name="Approve").click()
    expect(row(page, "ended succeeded")).to_be_visible()
    finished = [e.body for e in shop.live.events(address) if isinstance(e.body, ToolFinished)]
    assert [f.content for f in finished] == ["Ordered 4 tea as a gift."]
    assert all("422" in error for error in page.errors), "only the refused answer's status"


def test_the_console_shows_the_models_question_with_its_choices_and_answers_it(
    ui_stack: UiStack, watched: Watched
) -> None:
    address = fresh("ask")
    text = script({"calls": [{"name": "ask_user", "arguments": ASK}]}, {"reply": "{results}!"})
    with ui_stack.client() as api:
        api.send(address, text, kind="asker")
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(watched.page.locator(".notice", has_text="Which colour?")).to_be_visible()
    choices = watched.page.get_by_label("question answer")
    expect(choices.locator("option")).to_have_text(["", "red", "blue"])
    expect(watched.page.get_by_role("button", name="Approve")).to_have_count(0)
    watched.shot("ask-user")
    choices.select_option("blue")
    watched.page.get_by_role("button", name="Answer").click()
    expect(row(watched, "ended succeeded")).to_be_visible()
    expect(row(watched, "ask_user → ok")).to_have_count(1)
    with ui_stack.client() as api:
        events = list(api.events(address))
    assert [e.body.reply for e in events if isinstance(e.body, TurnEnded)] == ["blue!"]
    assert watched.errors == []
