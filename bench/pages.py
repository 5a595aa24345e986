"""`python -m bench.pages [--turns N] [--rounds R]`: the round trip of a tool that runs in
the page, from the model's call to the page and back to the next round.

The whole stack (restate-server, the endpoint, the gateway) under a temporary home, the
scripted model. An HTTP client stands in for the page: it follows the conversation's
events with its page id, and for each `approval_requested` with `page: true` claims the
request, "runs" the call (returns a fixed string) and posts the result. Each turn, on a
new agent, makes R rounds that each call the page's tool, then replies. Per call: from the
page seeing the request on its stream to its claim's 200 (claim), to its result's 202
(post), and to the page seeing the next round's `model_message` (the whole round trip).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec

from bench import BenchError
from bench.follow import wall_clock
from schemas.events import ApprovalRequested, Event, ModelMessage, TurnEnded
from schemas.spec import AgentSpec
from services.contracts import ADD_KEY, PUBLISH
from services.executor.scripted import script
from services.ingress import Ingress
from services.keys import new_key
from services.stack import Stack, isolated_settings

TENANT, KIND = "bench", "bench-pages"
SPEC = AgentSpec(
    kind=KIND, instructions="Follow the script.", model="script", tools={"page:*": "allow"}
)
TOOL = {"name": "read_title", "description": "The page's title."}
PATIENCE = 60.0


def write_key(ingress: Ingress, gateway: str) -> str:
    plaintext, key = new_key(TENANT, "write", datetime.fromtimestamp(wall_clock(), UTC))
    ingress.call(ADD_KEY, key, TENANT)
    deadline = time.monotonic() + PATIENCE
    with httpx.Client(base_url=gateway, timeout=10.0) as http:
        auth = {"Authorization": f"Bearer {plaintext}"}
        while http.get("/v1/agents", headers=auth).status_code != httpx.codes.OK:
            if time.monotonic() > deadline:
                raise BenchError("the gateway did not accept the new key")
            time.sleep(0.05)
    return plaintext


def events(stream: httpx.Response) -> Iterator[Event]:
    """The recorded events of an open SSE stream."""
    data = ""
    for line in stream.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
        elif not line and data:
            if '"seq"' in data:
                yield msgspec.json.decode(data, type=Event)
            data = ""


def turn(http: httpx.Client, address: str, rounds: int) -> list[tuple[float, float, float]]:
    """One turn of `rounds` page calls; per call (claim, post, round trip) in ms."""
    calls = [{"calls": [{"name": "read_title", "arguments": {}}]}] * rounds
    text = script(*calls, {"reply": "Done: {results}"})
    body = {"text": text, "kind": KIND, "page_tools": [TOOL]}
    sent = http.post(f"/v1/agents/{address}/messages", json=body)
    if sent.status_code != httpx.codes.ACCEPTED:
        raise BenchError(f"the message was refused: {sent.text}")
    found: list[tuple[float, float, float]] = []
    asked_at = claim_ms = post_ms = 0.0
    url = f"/v1/agents/{address}/events?page=bench-page"
    with http.stream("GET", url, timeout=PATIENCE) as stream:
        for event in events(stream):
            body_ = event.body
            if isinstance(body_, ApprovalRequested) and body_.page:
                asked_at = time.perf_counter()
                base = f"/v1/agents/{address}/page-calls/{body_.request_id}"
                claimed = http.post(f"{base}/claim", json={"page": "bench-page"})
                claim_ms = (time.perf_counter() - asked_at) * 1000
                if claimed.status_code != httpx.codes.OK:
                    raise BenchError(f"the claim was refused: {claimed.text}")
                result = {"page": "bench-page", "content": "My page", "kind": "page"}
                posted = http.post(f"{base}/result", json=result)
                post_ms = (time.perf_counter() - asked_at) * 1000
                if posted.status_code != httpx.codes.ACCEPTED:
                    raise BenchError(f"the result was refused: {posted.text}")
            elif isinstance(body_, ModelMessage) and asked_at:
                trip = (time.perf_counter() - asked_at) * 1000
                found.append((claim_ms, post_ms, trip))
                asked_at = 0.0
            elif isinstance(body_, TurnEnded):
                if body_.outcome != "succeeded":
                    raise BenchError(f"a turn ended {body_.outcome}: {body_.reason}")
                break
    if len(found) != rounds:
        raise BenchError(f"{address} made {len(found)} page calls, not {rounds}")
    return found


def render(found: list[tuple[float, float, float]], turns: int, rounds: int) -> str:
    def cell(index: int) -> str:
        values = sorted(f[index] for f in found)
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        return f"{statistics.median(values):.1f} / {p95:.1f}"

    return "\n".join(
        [
            f"{turns} turns x {rounds} page calls ({len(found)} calls); ms, p50 / p95",
            "| request seen → claim 200 | → result 202 | → next round's model_message |",
            "|---|---|---|",
            f"| {cell(0)} | {cell(1)} | {cell(2)} |",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pages", description=__doc__)
    parser.add_argument("--turns", type=int, default=10, help="turns, each a new agent (10)")
    parser.add_argument("--rounds", type=int, default=5, help="page calls per turn (5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-") as home:
        settings = isolated_settings(Path(home), live_token="", observer_modules=())
        try:
            with Stack(settings) as stack, closing(Ingress(settings.ingress_url)) as ingress:
                ingress.call(PUBLISH, SPEC, TENANT)
                key = write_key(ingress, stack.gateway.url)
                auth = {"Authorization": f"Bearer {key}"}
                found: list[tuple[float, float, float]] = []
                with httpx.Client(base_url=stack.gateway.url, headers=auth, timeout=30) as http:
                    for n in range(args.turns):
                        found += turn(http, f"{TENANT}.page-{n}", args.rounds)
        except BenchError as error:
            print(f"bench.pages: {error}", file=sys.stderr)
            return 1
    print(render(found, args.turns, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
