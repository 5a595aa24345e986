"""The console in headless Chromium (Debian's package, driven by Playwright), on a real
stack. Each test writes a screenshot of what it shows: to a temporary directory, or to
$CONSOLE_SCREENSHOTS (docs/console/ to refresh the pictures of the console's docs page)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, expect, sync_playwright

from schemas.events import ContextFolded, Event, ModelMessage, ToolFinished, TurnEnded
from services.client import until_turn_ends
from services.executor.scripted import script
from tests.durable.conftest import eventually
from tests.ui.conftest import CHROMIUM, SCREENSHOTS, UiStack

pytestmark = pytest.mark.durable
WAIT = 300_000  # the machine may be shared: a model turn can take minutes
expect.set_options(timeout=WAIT)
_names = count(1)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `make install` installs Debian's chromium package")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


class Watched:
    """A page, and every console error and uncaught exception it had."""

    def __init__(self, page: Page, shots: Path) -> None:
        self.page = page
        self.shots = shots
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"))


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get(SCREENSHOTS)
    if not chosen:
        return tmp_path_factory.mktemp("screenshots")
    path = Path(chosen)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def watched(browser: Browser, shots: Path) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    page = context.new_page()
    page.set_default_timeout(WAIT)
    yield Watched(page, shots)
    context.close()


def fresh(name: str) -> str:
    return f"acme.{name}-{next(_names)}"


def sign_in(w: Watched, stack: UiStack, scope: str = "write") -> None:
    """By keyboard: type the key, press Enter."""
    w.page.goto(f"{stack.url}/")
    w.page.locator("#key").fill(stack.keys[scope])
    w.page.keyboard.press("Enter")
    expect(w.page.get_by_role("heading", name="Agents")).to_be_visible()


def open_agent(w: Watched, stack: UiStack, address: str, seq: int = 0) -> None:
    w.page.goto(f"{stack.url}/#/agents/{address}" + (f"/{seq}" if seq else ""))
    expect(w.page.get_by_role("heading", name=address)).to_be_visible()


def row(w: Watched, pattern: str) -> Locator:
    return w.page.locator(".row:not(.placeholder)", has_text=re.compile(pattern))


def shown_seqs(w: Watched) -> list[int]:
    return [int(s) for s in w.page.locator(".row:not(.placeholder)").evaluate_all(
        "rows => rows.map(r => r.dataset.seq)")]  # fmt: skip


def test_a_key_nobody_made_is_said_so_in_a_persons_words(
    ui_stack: UiStack, watched: Watched
) -> None:
    watched.page.goto(f"{ui_stack.url}/")
    expect(watched.page.locator("#make-key")).to_contain_text("teaspill keys create")
    watched.page.locator("#key").fill("tsk_000000000000_" + "x" * 40)
    watched.page.get_by_role("button", name="Open console").click()
    expect(watched.page.locator("#error")).to_have_text(
        "This deployment does not know that key: it may have been made for another "
        "deployment, or mistyped."
    )
    watched.shot("wrong-key")
    assert all("401" in error for error in watched.errors), watched.errors


def test_a_malformed_key_gets_a_sentence_about_the_key(ui_stack: UiStack, watched: Watched) -> None:
    watched.page.goto(f"{ui_stack.url}/")
    watched.page.locator("#key").fill("my-password")
    watched.page.keyboard.press("Enter")
    banner = watched.page.locator("#error")
    expect(banner).to_contain_text("That is not a teaspill key: a key is tsk_, then 12 letters")
    for header_words in ("Authorization", "Bearer", "header"):
        expect(banner).not_to_contain_text(header_words)
    watched.shot("malformed-key")
    assert watched.errors == [], "nothing was sent"


def test_a_write_key_starts_a_new_conversation_by_choosing_a_published_kind(
    ui_stack: UiStack, watched: Watched
) -> None:
    name = f"newcomer-{next(_names)}"
    sign_in(watched, ui_stack)
    watched.page.get_by_role("button", name="New conversation").click()
    expect(watched.page.locator("#new-name")).to_be_focused()
    kinds = watched.page.locator("#kind option").all_inner_texts()
    assert {"calc", "chat", "script"} <= {k.split()[0] for k in kinds}
    watched.page.locator("#new-name").fill(name)
    watched.page.locator("#kind").select_option("script")
    watched.shot("new-conversation")
    watched.page.get_by_role("button", name="Start").click()
    address = f"acme.{name}"
    expect(watched.page.get_by_role("heading", name=address)).to_be_visible()
    expect(watched.page.locator(".notice")).to_contain_text(f"{address} is new")
    expect(watched.page.locator("#error")).to_be_hidden()
    expect(watched.page.locator("#kind")).to_have_value("script")
    expect(watched.page.locator("#stop")).to_be_hidden()
    watched.shot("new-agent")
    watched.page.locator("#message").fill(script({"reply": "Welcome aboard."}))
    watched.page.get_by_role("button", name="Send").click()
    expect(row(watched, "ended succeeded")).to_be_visible()
    expect(row(watched, r"script\s*Welcome aboard\.")).to_be_visible()
    expect(watched.page.locator(".status")).to_have_text("idle")
    expect(watched.page.locator("#stop")).to_be_hidden()
    watched.shot("new-agent-replied")
    with ui_stack.client() as api:
        assert api.agent(address).kind == "script"
    # The browser logs the 404 of the row read that found no agent yet; nothing else.
    assert watched.errors == [error for error in watched.errors if "404" in error]


def test_a_read_key_on_a_missing_agent_gets_no_advice_it_cannot_follow(
    ui_stack: UiStack, watched: Watched
) -> None:
    sign_in(watched, ui_stack, "read")
    expect(watched.page.get_by_role("button", name="New conversation")).to_have_count(0)
    address = fresh("ghost")
    open_agent(watched, ui_stack, address)
    expect(watched.page.locator(".notice")).to_have_text(f"There is no agent {address} yet.")
    expect(watched.page.locator("#error")).to_be_hidden()
    for control in ("#kind", "#send", "#message", "#stop", "#hold"):
        expect(watched.page.locator(control)).to_have_count(0)
    page_text = watched.page.locator("main").inner_text()
    assert "kind" not in page_text.lower()
    assert watched.errors == [error for error in watched.errors if "404" in error]


def test_the_agent_list_shows_the_tenants_agents_and_filters(
    ui_stack: UiStack, watched: Watched
) -> None:
    names = [fresh("listed"), fresh("filtered")]
    with ui_stack.client() as api:
        for name in names:
            api.send(name, script({"reply": "ok"}), kind="script")
    sign_in(watched, ui_stack)
    for name in names:
        expect(watched.page.locator(f'tr[data-address="{name}"]')).to_be_visible()
    watched.page.get_by_role("heading", name="Agents").click()  # away from the filter
    watched.page.keyboard.press("/")
    watched.page.keyboard.type(names[1])
    expect(watched.page.locator(f'tr[data-address="{names[0]}"]')).to_have_count(0)
    expect(watched.page.locator(f'tr[data-address="{names[1]}"]')).to_be_visible()
    watched.page.keyboard.press("Control+a")
    watched.page.keyboard.press("Backspace")
    watched.shot("agents")
    assert watched.errors == []


FIRST_LIVE_TEXT = """() => {
  window.firstLiveText = null;
  const seen = () => {
    const text = document.querySelector(".live .text");
    if (window.firstLiveText !== null || !text || !text.textContent) return;
    const rows = [...document.querySelectorAll(".row:not(.placeholder)")];
    window.firstLiveText = {
      text: text.textContent,
      messageShown: rows.some((r) => r.textContent.includes("smollm2")),
    };
  };
  new MutationObserver(seen).observe(document.body, {
    childList: true, subtree: true, characterData: true,
  });
}"""
"""Records the first live text the page shows, and whether the round's recorded message
was on the page by then. The small model writes a reply in well under a second, so the
live text can come and go between two of Playwright's polls; a MutationObserver sees
every change to the page."""


def test_live_text_appears_before_the_final_message(ui_stack: UiStack, watched: Watched) -> None:
    address = fresh("chat")
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(watched.page.locator(".notice")).to_contain_text(f"{address} is new")
    watched.page.locator("#kind").select_option("chat")
    watched.page.locator("#message").fill("Tell me about the sea.")
    watched.page.evaluate(FIRST_LIVE_TEXT)
    watched.page.keyboard.press("Control+Enter")
    watched.page.wait_for_function("() => window.firstLiveText !== null")
    first = watched.page.evaluate("() => window.firstLiveText")
    partial = first["text"]
    assert not first["messageShown"], "the live text came after the message"
    watched.shot("live-text")
    expect(row(watched, "ended succeeded")).to_be_visible()
    expect(watched.page.locator(".live")).to_have_count(0)
    with ui_stack.client() as api:
        events = list(api.events(address))
    message = next(e.body for e in events if isinstance(e.body, ModelMessage))
    assert message.text.startswith(partial.strip()[:10])
    expect(row(watched, "smollm2")).to_contain_text(message.text.strip()[:40])
    expect(row(watched, "ended succeeded")).to_contain_text("completion tokens")
    watched.shot("turn-ended")
    assert watched.errors == [error for error in watched.errors if "404" in error]


CALCULATE = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}"},
)


def test_approving_with_the_button_runs_the_tool_once(ui_stack: UiStack, watched: Watched) -> None:
    address = fresh("approve")
    with ui_stack.client() as api:
        api.send(address, CALCULATE, kind="calc")
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    approve = watched.page.get_by_role("button", name="Approve")
    watched.page.get_by_label(re.compile("Note for")).fill("Go ahead.")
    watched.shot("approval")
    approve.focus()
    watched.page.keyboard.press("Enter")
    expect(row(watched, "approved")).to_contain_text("Go ahead.")
    expect(row(watched, "ended succeeded")).to_be_visible()
    expect(row(watched, "calculator → ok")).to_have_count(1)
    expect(watched.page.get_by_role("button", name="Approve")).to_have_count(0)
    with ui_stack.client() as api:
        events = list(api.events(address))
    assert [e.body.content for e in events if isinstance(e.body, ToolFinished)] == ["42"]
    assert watched.errors == []


def test_the_stop_button_stops_a_slow_turn(ui_stack: UiStack, watched: Watched) -> None:
    address = fresh("stop")
    with ui_stack.client() as api:
        api.send(address, script({"sleep": 120, "reply": "too late"}), kind="script")
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(row(watched, "turn 1")).to_be_visible()
    expect(watched.page.locator(".status")).to_have_text("running")
    watched.page.locator("#stop").click()
    expect(row(watched, "ended stopped")).to_be_visible(timeout=30_000)
    expect(watched.page.locator(".status")).to_have_text("idle")
    expect(watched.page.locator("#stop")).to_be_hidden()  # nothing runs now: nothing to stop
    watched.shot("stopped")
    with ui_stack.client() as api:
        events = list(api.events(address))
    assert [e.body.outcome for e in events if isinstance(e.body, TurnEnded)] == ["stopped"]
    assert watched.errors == []


def test_pause_holds_a_running_turn_after_its_round_and_resume_runs_it_on(
    ui_stack: UiStack, watched: Watched
) -> None:
    address = fresh("hold")
    calculate = {"name": "calculator", "arguments": {"expression": "6*7"}}
    with ui_stack.client() as api:
        api.send(
            address,
            script({"sleep": 3, "calls": [calculate]}, {"reply": "{results}"}),
            kind="script",
        )
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(watched.page.locator(".status")).to_have_text("running")
    watched.page.locator("#hold").click()
    expect(row(watched, "paused")).to_be_visible(timeout=30_000)
    expect(watched.page.locator(".status")).to_have_text("paused")
    expect(row(watched, "calculator → ok")).to_have_count(1)
    expect(watched.page.locator("#hold")).to_have_text("Resume")
    watched.shot("paused")
    watched.page.locator("#hold").click()
    expect(row(watched, "ended succeeded")).to_be_visible(timeout=30_000)
    expect(watched.page.locator(".status")).to_have_text("idle")
    expect(watched.page.locator("#hold")).to_have_text("Pause")
    with ui_stack.client() as api:
        events = list(api.events(address))
    assert [e.body.outcome for e in events if isinstance(e.body, TurnEnded)] == ["succeeded"]
    assert watched.errors == []


def test_a_context_fold_shows_its_turns_and_its_summary(
    ui_stack: UiStack, watched: Watched
) -> None:
    address = fresh("folds")
    fold = _folded(ui_stack, address)
    body = fold.body
    assert isinstance(body, ContextFolded)
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address, seq=fold.seq)
    shown = watched.page.locator(f'.row.target[data-seq="{fold.seq}"]')
    many = body.last_turn > body.first_turn
    turns = f"turns {body.first_turn}-{body.last_turn}" if many else f"turn {body.first_turn}"
    expect(shown).to_contain_text("context folded")
    expect(shown).to_contain_text(f"{turns} summarised")
    expect(shown).to_contain_text(f"{body.tokens_before} → {body.tokens_after} prompt tokens")
    shown.locator("summary").click()
    expect(shown.locator("pre")).to_contain_text(body.summary.strip()[:40])
    watched.page.wait_for_function(BELOW, arg=[fold.seq, fold.seq + 1], timeout=60_000)
    watched.shot("fold")
    assert watched.errors == []


BELOW = """([upper, lower]) => {
  const [a, b] = [upper, lower].map((seq) => document.querySelector(`.row[data-seq="${seq}"]`));
  return a && b && a.offsetTop + a.offsetHeight <= b.offsetTop + 1;
}"""


def _folded(stack: UiStack, address: str) -> Event:
    """Long scripted turns in a small window until the agent folds; the fold event."""
    spec = {"kind": "long", "instructions": "Answer at length.", "model": "script",
            "limits": {"context_window": 1500, "max_tokens": 64}}  # fmt: skip
    with stack.client() as api:
        api.publish(spec)
        for turn in range(1, 13):
            reply = f"Reply {turn}: " + " ".join(f"w{turn}x{i}" for i in range(80))
            sent = api.send(address, script({"reply": reply}), kind="long")
            for _ in until_turn_ends(api.follow(address, after=sent.after_seq)):
                pass
            folds = [e for e in api.events(address) if isinstance(e.body, ContextFolded)]
            if folds:
                return folds[0]
    raise AssertionError("twelve long turns in a 1,500-token window never folded")


def test_a_reload_mid_turn_shows_the_same_timeline_once(
    ui_stack: UiStack, watched: Watched
) -> None:
    address = fresh("reload")
    slow = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"sleep": 3, "reply": "It is {results}"},
    )
    with ui_stack.client() as api:
        api.send(address, slow, kind="script")
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(row(watched, "calculator → ok")).to_be_visible()
    watched.page.reload()
    expect(row(watched, "ended succeeded")).to_be_visible()
    with ui_stack.client() as api:
        last = api.agent(address).last_seq
    assert shown_seqs(watched) == list(range(1, last + 1))
    open_agent(watched, ui_stack, address, seq=3)
    expect(watched.page.locator('.row.target[data-seq="3"]')).to_contain_text("tool call")
    watched.shot("event-link")
    assert watched.errors == []


def test_a_tool_that_runs_in_the_page_is_shown_waiting_for_the_page_without_buttons(
    ui_stack: UiStack, watched: Watched
) -> None:
    address = fresh("page-call")
    text = script({"calls": [{"name": "read_title", "arguments": {}}]}, {"reply": "{results}"})
    title = {"name": "read_title", "description": "The page's title.", "parameters": {}}
    with httpx.Client(base_url=ui_stack.url, timeout=30) as http:
        sent = http.post(
            f"/v1/agents/{address}/messages",
            json={"text": text, "kind": "pager", "page_tools": [title]},
            headers={"Authorization": f"Bearer {ui_stack.keys['write']}"},
        )
    assert sent.status_code == 202, sent.text
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(row(watched, "runs in the page")).to_contain_text("read_title")
    expect(row(watched, "runs in the page")).to_contain_text("Waiting for a page")
    for name in ("Approve", "Deny", "Answer", "Decline"):
        expect(watched.page.get_by_role("button", name=name)).to_have_count(0)
    watched.shot("page-call")
    assert watched.errors == []


def test_a_turn_shows_the_memories_it_was_shown_and_the_documents_it_found(
    ui_stack: UiStack, watched: Watched
) -> None:
    address = fresh("reader")
    auth = {"Authorization": f"Bearer {ui_stack.keys['admin']}"}
    with httpx.Client(base_url=ui_stack.url, timeout=30) as http:
        kept = http.post("/v1/memory", json={"text": "The office manager is Ann."}, headers=auth)
        assert kept.status_code == 201, kept.text
        memory = kept.json()["id"]
    with ui_stack.client() as api:
        document = api.upload_document("Opening hours", "The office opens at nine on weekdays.")
        api.release_document(document.id)
        eventually(lambda: api.search_documents("office opens") or None, 30, "the release")
        call = {"calls": [{"name": "search_docs", "arguments": {"query": "office opens"}}]}
        api.send(address, script(call, {"reply": "It opens at nine."}), kind="reader")
    sign_in(watched, ui_stack)
    open_agent(watched, ui_stack, address)
    expect(row(watched, "ended succeeded")).to_be_visible()
    expect(row(watched, "shown a memory").first).to_contain_text(memory)
    expect(row(watched, "search_docs → ok")).to_contain_text("“Opening hours” §")
    watched.shot("memories-and-documents")
    assert watched.errors == []


def test_a_read_only_key_sees_no_controls(ui_stack: UiStack, watched: Watched) -> None:
    address = fresh("readonly")
    with ui_stack.client() as api:
        api.send(address, CALCULATE, kind="calc")
    sign_in(watched, ui_stack, "read")
    open_agent(watched, ui_stack, address)
    expect(row(watched, "needs approval")).to_be_visible()
    for control in ("#send", "#stop", "#hold", "#message"):
        expect(watched.page.locator(control)).to_have_count(0)
    expect(watched.page.get_by_role("button", name="Approve")).to_have_count(0)
    watched.shot("read-only")
    assert watched.errors == []
