"""The console answers a tool's question (an MCP server's input-required result) in
headless Chromium, on a real stack with the test's own MCP server: the question and its
form are shown, a missing answer gets the gateway's sentence, and the filled form resumes
the call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from schemas.events import ToolFinished
from tests.durable.test_mcp_input import Shop, shop
from tests.ui.test_browser import WAIT, Watched, browser, row, shots

pytestmark = pytest.mark.durable
__all__ = ["browser", "shop", "shots"]  # the fixtures this module uses from others


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
