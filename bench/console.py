"""`python -m bench.console`: the web console in headless Chromium on a real stack.

- open: the time from opening an agent with a 10,000-event timeline to its last event
  shown, and the browser's memory afterwards (and after scrolling to the first event);
- live text: the time from the executor writing a piece of text to the page showing it
  (a `clock` model writes its wall-clock time as the text; see `bench/clock_model.py`).

The stack is restate-server, the endpoint and the gateway on free ports in a temporary
home, stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Page, sync_playwright

from bench import BenchError
from services.client import Client, until_turn_ends
from services.contracts import ADD_KEY
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.settings import Settings
from services.stack import Endpoint, Gateway, RestateServer, isolated_settings, register

CHROMIUM = "/usr/bin/chromium"
WIDE = "acme.wide"
CLOCK = "acme.clock"
ROUNDS = 11
CALLS = 50
PER_TURN = 1 + (ROUNDS - 1) * (1 + 2 * CALLS) + 2


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000, help="timeline length (at least)")
    parser.add_argument("--repeats", type=int, default=5, help="openings to time")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args(argv)


@contextmanager
def stack(home: Path) -> Iterator[tuple[Settings, str]]:
    settings = isolated_settings(
        home,
        live_token="bench-live",  # noqa: S106 - a made-up token for this run
        model_modules=("bench.clock_model",),
        model_context=2048,
    )
    restate, endpoint, gateway = RestateServer(settings), Endpoint(settings), Gateway(settings)
    restate.start()
    try:
        endpoint.start()
        register(settings)
        gateway.start()
        yield settings, admin_key(settings, gateway.url)
    finally:
        gateway.stop()
        endpoint.stop()
        restate.stop()


def admin_key(settings: Settings, url: str) -> str:
    plaintext, key = new_key("acme", "admin", datetime.now(UTC))  # noqa: TID251 - not durable code
    ingress = Ingress(settings.ingress_url, timeout=30)
    try:
        ingress.call(ADD_KEY, key, "acme")
    finally:
        ingress.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/v1/me", headers={"Authorization": f"Bearer {plaintext}"})
        if answer.status_code == httpx.codes.OK:
            return plaintext
        time.sleep(0.2)
    raise BenchError("the admin key never reached the projection")


def build(api: Client, events: int) -> tuple[int, float]:
    """An agent with at least `events` events: turns of ten rounds of many calculator calls."""
    spec = {"kind": "wide", "instructions": "Calculate.", "model": "script",
            "tools": ["calculator"], "limits": {"max_rounds": ROUNDS + 1}}  # fmt: skip
    api.publish(spec)
    started = time.perf_counter()
    for turn in range(1, -(-events // PER_TURN) + 1):
        calls = [
            {"name": "calculator", "arguments": {"expression": f"{turn}+{c}"}} for c in range(CALLS)
        ]
        text = script(*[{"calls": calls}] * (ROUNDS - 1), {"reply": f"turn {turn} done"})
        sent = api.send(WIDE, text, kind="wide")
        for _ in until_turn_ends(api.follow(WIDE, after=sent.after_seq)):
            pass
    last = api.agent(WIDE).last_seq
    return last, time.perf_counter() - started


def signed_in(browser: Browser, key: str) -> Page:
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    context.add_init_script(f"sessionStorage.setItem('teaspill.key', {json.dumps(key)})")
    page = context.new_page()
    page.set_default_timeout(120_000)
    return page


def heap(page: Page) -> dict[str, float]:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {"js_heap_mb": metrics["JSHeapUsedSize"] / 2**20, "dom_nodes": metrics["Nodes"]}


def open_times(browser: Browser, url: str, key: str, last: int, repeats: int) -> dict[str, Any]:
    times: list[float] = []
    page: Page | None = None
    for _ in range(repeats):
        if page is not None:
            page.context.close()
        page = signed_in(browser, key)
        page.goto(f"{url}/")
        page.wait_for_selector("#filter")
        started = time.perf_counter()
        page.evaluate(f"location.hash = '#/agents/{WIDE}'")
        page.wait_for_selector(f'.row[data-seq="{last}"]:not(.placeholder)')
        times.append((time.perf_counter() - started) * 1000)
    assert page is not None
    after_open = heap(page)
    started = time.perf_counter()
    page.evaluate("document.querySelector('.scroller').scrollTop = 0")
    page.wait_for_selector('.row[data-seq="1"]:not(.placeholder)')
    to_first = (time.perf_counter() - started) * 1000
    return {"open_ms": times, "after_open": after_open, "to_first_ms": to_first,
            "after_first": heap(page)}  # fmt: skip


WATCH = """() => {
  window.seen = [];
  const area = document.querySelector('.live-area');
  new MutationObserver(() => window.seen.push([Date.now(), area.textContent]))
    .observe(area, {subtree: true, childList: true, characterData: true});
}"""


def live_latency(browser: Browser, url: str, key: str, api: Client) -> list[float]:
    api.publish({"kind": "clock", "instructions": "Tell the time.", "model": "clock"})
    api.send(CLOCK, "warm up", kind="clock")
    for _ in until_turn_ends(api.follow(CLOCK)):
        pass
    page = signed_in(browser, key)
    page.goto(f"{url}/#/agents/{CLOCK}")
    page.wait_for_selector(".row:not(.placeholder)")
    page.evaluate(WATCH)
    sent = api.send(CLOCK, "what time is it?")
    for _ in until_turn_ends(api.follow(CLOCK, after=sent.after_seq)):
        pass
    seen: list[tuple[int, str]] = page.evaluate("window.seen")
    latencies: list[float] = []
    shown: set[str] = set()
    for when, text in seen:
        for stamp in re.findall(r"@(\d{13})", text):
            if stamp not in shown:
                shown.add(stamp)
                latencies.append(when - int(stamp))
    return latencies


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="teaspill-console-bench-") as home,
        stack(Path(home)) as (settings, key),
        Client(f"http://127.0.0.1:{settings.gateway_port}", key, timeout=120) as api,
        sync_playwright() as playwright,
    ):
        last, build_s = build(api, args.events)
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        opened = open_times(browser, api.url, key, last, args.repeats)
        live = live_latency(browser, api.url, key, api)
        browser.close()
    return {"events": last, "build_s": build_s, **opened, "live_ms": live}


def render(result: dict[str, Any]) -> str:
    opens = result["open_ms"]
    live = sorted(result["live_ms"])
    lines = [
        f"timeline: {result['events']} events (built in {result['build_s']:.0f} s)",
        f"open to last event shown: median {statistics.median(opens):.0f} ms "
        f"(min {min(opens):.0f}, max {max(opens):.0f}, {len(opens)} openings)",
        f"memory after opening: {result['after_open']['js_heap_mb']:.1f} MB JS heap, "
        f"{result['after_open']['dom_nodes']:.0f} DOM nodes",
        f"scroll to the first event: {result['to_first_ms']:.0f} ms; then "
        f"{result['after_first']['js_heap_mb']:.1f} MB JS heap, "
        f"{result['after_first']['dom_nodes']:.0f} DOM nodes",
    ]
    if live:
        p95 = live[min(len(live) - 1, int(len(live) * 0.95))]
        lines.append(
            f"live text, executor to page: median {statistics.median(live):.0f} ms, "
            f"p95 {p95:.0f} ms, max {live[-1]:.0f} ms ({len(live)} pieces)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = measure(args)
    except BenchError as error:
        print(f"bench.console: {error}", file=sys.stderr)
        return 1
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
