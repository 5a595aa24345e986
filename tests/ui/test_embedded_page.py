"""A page embedded in a product's own site, in headless Chromium on a real stack: served
from an origin its publishable key lists, it asks the gateway for its end user's
conversation with the key and the user's token, sends a message and follows the turn to
its end; the same page served from an origin the key does not list is refused by CORS,
its preflight before anything is sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import httpx
import jwt
import pytest
from playwright.sync_api import Browser, expect

from services.endusers import conversation_address
from tests.durable.conftest import eventually
from tests.gateway.test_stack import CALCULATE
from tests.ui.conftest import UiStack
from tests.ui.test_browser import WAIT, browser

pytestmark = pytest.mark.durable
__all__ = ["browser"]  # the fixture this module uses from another
SECRET = "the-product-backends-secret-0123456789-0123456789"  # noqa: S105 - a test value

PAGE = """<!doctype html>
<meta charset="utf-8">
<title>Assistant</title>
<ol id="log"></ol>
<script>
const GATEWAY = %(gateway)s, KEY = %(key)s, TOKEN = %(token)s, TEXT = %(text)s;

function show(text) {
  const item = document.createElement("li");
  item.textContent = text;
  document.getElementById("log").append(item);
}

async function call(path, init = {}) {
  const headers = {
    "Authorization": `Bearer ${KEY}`,
    "Teaspill-User": TOKEN,
    "Content-Type": "application/json",
  };
  const response = await fetch(GATEWAY + path, { ...init, headers });
  if (!response.ok) throw new Error((await response.json()).error.message);
  return response;
}

async function follow(address, after) {
  const response = await call(`/v1/agents/${address}/events?after=${after}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    const frames = buffered.split("\\n\\n");
    buffered = frames.pop();
    for (const frame of frames) {
      const data = frame.split("\\n").find((line) => line.startsWith("data: "));
      if (!data || frame.includes("event: delta")) continue;
      const event = JSON.parse(data.slice(6));
      if (event.body?.type === "turn_ended") {
        show(`ended: ${event.body.reply}`);
        reader.cancel();
        return;
      }
    }
  }
}

async function main() {
  const me = await (await call("/v1/me")).json();
  show(`user: ${me.user}`);
  const { address } = me.conversations[0];
  const sent = await (await call(`/v1/agents/${address}/messages`, {
    method: "POST",
    body: JSON.stringify({ text: TEXT }),
  })).json();
  await follow(address, sent.after_seq);
}

main().catch((error) => show(`failed: ${error.message}`));
</script>
"""


def signed(user: str, key_id: str) -> str:
    """What the product's backend signs for its signed-in user, for the key `key_id`."""
    claims = {"sub": user, "aud": key_id, "exp": int(time.time()) + 600}  # noqa: TID251
    return jwt.encode(claims, SECRET, algorithm="HS256")


@dataclass
class Site:
    """The product's own site: one page, on 127.0.0.1 (the origin its key lists) and on
    localhost (the same server, another origin)."""

    port: int
    key_id: str
    key: str
    token: str

    @property
    def allowed(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def elsewhere(self) -> str:
        return f"http://localhost:{self.port}"


class Served(ThreadingHTTPServer):
    page = b""


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = cast(Served, self.server).page
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(ui_stack: UiStack) -> Iterator[Site]:
    admin = {"Authorization": f"Bearer {ui_stack.keys['admin']}"}
    with httpx.Client(base_url=ui_stack.url, timeout=30) as http:
        registered = http.put(
            "/v1/end-users", json={"algorithm": "HS256", "key": SECRET}, headers=admin
        )
        assert registered.status_code == 200, registered.text
        server = Served(("127.0.0.1", 0), Handler)
        port = server.server_address[1]
        made = http.post(
            "/v1/keys",
            json={
                "scope": "publishable",
                "name": "site",
                "origins": [f"http://127.0.0.1:{port}"],
                "kinds": ["script"],
            },
            headers=admin,
        )
        assert made.status_code == 201, made.text
        key, key_id = made.json()["key"], made.json()["info"]["id"]
        user = signed("shopper-7", key_id)
        page = {"Authorization": f"Bearer {key}", "Teaspill-User": user}
        eventually(
            lambda: (
                http.get(
                    "/v1/me", headers={**page, "Origin": f"http://127.0.0.1:{port}"}
                ).status_code
                == 200
                or None
            ),
            60,
            "the key and the registration to work",
        )
    values = {"gateway": ui_stack.url, "key": key, "token": user, "text": CALCULATE}
    server.page = (PAGE % {name: json.dumps(v) for name, v in values.items()}).encode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Site(port, key_id, key, user)
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_on_its_keys_origin_talks_to_its_users_conversation(
    browser: Browser, site: Site
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT)
        page.goto(f"{site.allowed}/")
        log = page.locator("#log li")
        expect(log.first).to_have_text("user: shopper-7")
        expect(log.last).to_have_text("ended: It is 42")
        assert not [t for t in log.all_text_contents() if t.startswith("failed")]
    finally:
        context.close()


def test_the_same_page_on_another_origin_is_refused_by_cors(
    browser: Browser, site: Site, ui_stack: UiStack
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT)
        page.goto(f"{site.elsewhere}/")
        expect(page.locator("#log li")).to_have_text(["failed: Failed to fetch"])
    finally:
        context.close()
    ask = {"Origin": site.elsewhere, "Access-Control-Request-Method": "GET"}
    refused = httpx.options(f"{ui_stack.url}/v1/me", headers=ask, timeout=30)
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers


ASK = """async ([gateway, key, token, routes]) => {
  const answers = [];
  for (const [method, path, body] of routes) {
    const answer = await fetch(gateway + path, {
      method,
      headers: { Authorization: `Bearer ${key}`, "Teaspill-User": token,
                 "Content-Type": "application/json" },
      body: body === null ? undefined : JSON.stringify(body),
    });
    answers.push([answer.status, (await answer.json()).error?.message ?? ""]);
  }
  return answers;
}"""


def test_from_its_page_the_key_cannot_list_publish_read_another_user_or_make_keys(
    browser: Browser, site: Site, ui_stack: UiStack
) -> None:
    """The page's own requests, made in the browser with its key and its user's token."""
    theirs = conversation_address("acme", "script", "shopper-8")
    with httpx.Client(base_url=ui_stack.url, timeout=30) as http:
        page_of_v = {"Authorization": f"Bearer {site.key}", "Origin": site.allowed,
                     "Teaspill-User": signed("shopper-8", site.key_id)}  # fmt: skip
        sent = http.post(f"/v1/agents/{theirs}/messages", json={"text": "hi"}, headers=page_of_v)
        assert sent.status_code == 202, sent.text
        eventually(
            lambda: http.get(f"/v1/agents/{theirs}", headers=page_of_v).status_code == 200 or None,
            60,
            "V's conversation to exist",
        )
    routes = [
        ("GET", "/v1/agents", None),
        ("POST", "/v1/specs", {"kind": "x", "instructions": "x", "model": "script"}),
        ("GET", f"/v1/agents/{theirs}/timeline", None),
        ("POST", "/v1/keys", {"scope": "admin"}),
    ]
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT)
        page.goto(f"{site.allowed}/")
        answers = page.evaluate(ASK, [ui_stack.url, site.key, site.token, routes])
    finally:
        context.close()
    statuses = [status for status, _ in answers]
    assert statuses == [403, 403, 404, 403], answers
    assert answers[0][1].startswith("a publishable key cannot call GET /v1/agents")
    assert answers[2][1].startswith(f"there is no agent {theirs}")
