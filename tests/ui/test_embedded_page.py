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


@dataclass
class Site:
    """The product's own site: one page, on 127.0.0.1 (the origin its key lists) and on
    localhost (the same server, another origin)."""

    port: int
    key_id: str

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
        user = jwt.encode(
            {"sub": "shopper-7", "aud": key_id, "exp": int(time.time()) + 600},  # noqa: TID251
            SECRET,
            algorithm="HS256",
        )
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
        yield Site(port, key_id)
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
