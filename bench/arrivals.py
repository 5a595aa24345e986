"""`python -m bench.arrivals [--schedules N] [--deliveries D]`: how on time schedules fire
and how soon a webhook delivery starts its turn.

A stack with the gateway, under a temporary home. First N `at` schedules, one on each of
N new agents, all planned for the same instant: for each, the schedule's planned time
against the time its agent recorded `schedule_fired` (the wake that took the message)
and `turn_started` (the turn's model step), both from the agent's events, so the
figures are planned-against-actual on one clock. Then D webhook deliveries to one agent,
one after the other, each signed and posted, waited for until its turn ends: the time to
the gateway's 202, and from the send to the turn's `turn_started`.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
from standardwebhooks.webhooks import Webhook

from bench import BenchError
from schemas.events import Event, ScheduleFired, TurnEnded, TurnStarted
from schemas.schedule import At, ScheduleSpec
from schemas.spec import AgentSpec
from services.contracts import ADD_KEY, ADD_SCHEDULE, PUBLISH
from services.ingress import Ingress
from services.keys import new_key
from services.stack import Stack, isolated_settings

TENANT, KIND = "bench", "bench-clock"
SPEC = AgentSpec(kind=KIND, instructions="Say what you were told.", model="script")


def _now() -> datetime:
    return datetime.now(UTC)  # noqa: TID251 - the benchmark is a client, not durable code


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def rank(share: float) -> float:
        return ordered[max(0, math.ceil(share * len(ordered)) - 1)]

    return {"p50": rank(0.5), "p95": rank(0.95), "p99": rank(0.99), "max": ordered[-1]}


def _events(db: Path, agents: str) -> list[Event]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        rows = con.execute(
            "select event from events where agent like ? and type in "
            "('schedule_fired', 'turn_started', 'turn_ended')",
            (agents,),
        ).fetchall()
    return [msgspec.json.decode(row[0], type=Event) for row in rows]


def _wait(done: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = done()
        if found is not None:
            return found
        time.sleep(0.05)
    raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")


def schedules(ingress: Ingress, db: Path, count: int, lead: float) -> dict[str, Any]:
    """`count` agents, one `at` schedule each, all planned `lead` seconds from now."""
    planned = _now() + timedelta(seconds=lead)
    spec = ScheduleSpec("tick", At(planned), kind=KIND)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: ingress.call(ADD_SCHEDULE, spec, f"{TENANT}.s{n}"), range(count)))
    made = _now()
    if made >= planned:
        raise BenchError(f"making {count} schedules took past their instant: raise --lead")

    def ended() -> list[Event] | None:
        events = _events(db, f"{TENANT}.s%")
        finished = sum(isinstance(e.body, TurnEnded) for e in events)
        return events if finished >= count else None

    events = _wait(ended, 600.0, f"{count} scheduled turns to end")
    return _lateness(events, planned, count) | {
        "made_in_s": (made - (planned - timedelta(seconds=lead))).total_seconds()
    }


def _lateness(events: Iterable[Event], planned: datetime, count: int) -> dict[str, Any]:
    fired = [e for e in events if isinstance(e.body, ScheduleFired)]
    started = [e for e in events if isinstance(e.body, TurnStarted)]
    bad = [e for e in events if isinstance(e.body, TurnEnded) and e.body.outcome != "succeeded"]
    if len(fired) != count or len(started) != count or bad:
        raise BenchError(f"{len(fired)} fires, {len(started)} turns, {len(bad)} failed of {count}")
    if any(isinstance(e.body, ScheduleFired) and e.body.missed for e in fired):
        raise BenchError("a fire counted missed fires: the stack was too slow to fire on time")
    return {
        "schedules": count,
        "sent_ms": percentiles([(_sent(e) - planned).total_seconds() * 1000 for e in fired]),
        "turn_started_ms": percentiles([(e.at - planned).total_seconds() * 1000 for e in started]),
    }


def _sent(event: Event) -> datetime:
    assert isinstance(event.body, ScheduleFired)
    if event.body.sent is None:
        raise BenchError("a schedule_fired event does not say when it was sent")
    return event.body.sent


def deliveries(http: httpx.Client, ingress: Ingress, db: Path, count: int) -> dict[str, Any]:
    plaintext, key = new_key(TENANT, "admin", _now())
    ingress.call(ADD_KEY, key, TENANT)
    auth = {"Authorization": f"Bearer {plaintext}"}
    _wait(lambda: http.get("/v1/me", headers=auth).status_code == 200 or None, 60, "the key")
    address = f"{TENANT}.hooked"
    ingress.message(address, "hello", SPEC)
    hook = http.post("/v1/hooks", json={"address": address, "template": "{{ n }}"}, headers=auth)
    if hook.status_code != 201:
        raise BenchError(f"the hook was not made: {hook.text}")
    made = hook.json()
    answered, started = [], []
    for n in range(count):
        body = json.dumps({"n": f"delivery {n}"})
        sent = _now()
        headers = {
            "webhook-id": f"bench-{n}",
            "webhook-timestamp": str(int(sent.timestamp())),
            "webhook-signature": Webhook(made["secret"]).sign(f"bench-{n}", sent, body),
        }
        clock = time.perf_counter()
        response = http.post(f"/hooks/{made['id']}", content=body, headers=headers)
        answered.append((time.perf_counter() - clock) * 1000)
        if response.status_code != 202:
            raise BenchError(f"delivery {n} was answered {response.status_code}: {response.text}")
        turn = _wait(lambda n=n: _turn_of(db, address, f"delivery {n}"), 60, f"delivery {n}'s turn")
        started.append((turn.at - sent).total_seconds() * 1000)
    return {
        "deliveries": count,
        "accepted_ms": percentiles(answered),
        "turn_started_ms": percentiles(started),
    }


def _turn_of(db: Path, address: str, text: str) -> Event | None:
    events = _events(db, address)
    starts = [e for e in events if isinstance(e.body, TurnStarted) and e.body.text == text]
    if not starts:
        return None
    ends = [e for e in events if e.turn == starts[0].turn and isinstance(e.body, TurnEnded)]
    return starts[0] if ends else None


def render(results: dict[str, Any]) -> str:
    lines = ["| figure | p50 | p95 | p99 | max |", "|---|---|---|---|---|"]
    rows = (
        (
            f"{results['schedules']['schedules']} schedules: planned → fire sent",
            results["schedules"]["sent_ms"],
        ),
        ("planned → `turn_started`", results["schedules"]["turn_started_ms"]),
        (
            f"{results['hooks']['deliveries']} deliveries: send → 202",
            results["hooks"]["accepted_ms"],
        ),
        ("send → `turn_started`", results["hooks"]["turn_started_ms"]),
    )
    for name, figures in rows:
        lines.append(
            f"| {name} | "
            + " | ".join(f"{figures[p]:.0f} ms" for p in ("p50", "p95", "p99", "max"))
            + " |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.arrivals", description=__doc__)
    parser.add_argument("--schedules", type=int, default=1000, help="schedules at once (1000)")
    parser.add_argument("--lead", type=float, default=30.0, help="seconds to their instant (30)")
    parser.add_argument("--deliveries", type=int, default=50, help="webhook deliveries (50)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-") as home:
        settings = isolated_settings(
            Path(home), live_token="", observer_modules=(), key_rate=0.0, hook_rate=0.0
        )
        db = settings.home / "projection.db"
        try:
            with Stack(settings) as stack, closing(Ingress(settings.ingress_url)) as ingress:
                ingress.call(PUBLISH, SPEC, TENANT)
                with httpx.Client(base_url=stack.gateway.url, timeout=30) as http:
                    results = {
                        "schedules": schedules(ingress, db, args.schedules, args.lead),
                        "hooks": deliveries(http, ingress, db, args.deliveries),
                    }
        except BenchError as error:
            print(f"bench.arrivals: {error}", file=sys.stderr)
            return 1
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
