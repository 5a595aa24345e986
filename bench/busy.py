"""`python -m bench.busy [--pairs N] [--sleep S]`: what a message that steers a running
turn costs, against the same message queued behind it.

A stack without the gateway, under a temporary home, the scripted model. Each pair, on
two new agents: a slow turn (a round of S seconds that calls the calculator, then a
reply), and, once the agent reports the turn running, a second message, `queue` to one
agent and `steer` to the other. For each case: the time from sending the second message
to the end of the turn that answers it (the queued message's own turn; the steered
message's, the running one, which reads it in its second round), and what Restate made
for the agent (and its tenant's spec lookups) from the first send until every invocation
had finished: invocations, journal entries and bytes (journals are kept for the run; the
benchmark's own `status` reads are left out). Both cases must answer the second message, or
no figures are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import BenchError
from schemas.spec import AgentSpec, WhileBusy
from schemas.wake import Message
from services.contracts import PUBLISH
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Stack, isolated_settings
from services.stack.journal import RestateAdmin

TENANT, KIND = "bench", "bench-busy"
SPEC = AgentSpec(
    kind=KIND, instructions="Follow the script.", model="script", tools=("calculator",)
)
SECOND = "Say hello too."
ANSWER = f"You said: {SECOND}"
SETTLE = 60.0


@dataclass(frozen=True)
class Case:
    """One message queued or steered, and what its exchange cost."""

    policy: str
    ms: float
    """From sending the second message to the end of the turn that answered it."""
    invocations: int
    entries: int
    bytes: int
    by_handler: dict[str, int]


def slow_turn(seconds: float) -> str:
    calculate = {"name": "calculator", "arguments": {"expression": "6*7"}}
    return script({"sleep": seconds, "calls": [calculate]}, {"reply": "It is {results}."})


def _running(ingress: Ingress, address: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while ingress.status(address).state != "running":
        if time.monotonic() > deadline:
            raise BenchError(f"{address} never reported its turn running")
        time.sleep(0.01)


def exchange(
    ingress: Ingress, admin: RestateAdmin, address: str, policy: WhileBusy, seconds: float
) -> Case:
    """A slow turn, then the second message with `policy` once the turn runs."""
    before = {invocation.id for invocation in admin.invocations()}
    # The first message goes to the wake alone: only the second one's path is compared.
    first = ingress.send_wake(address, Message(slow_turn(seconds), kind=KIND))
    _running(ingress, address)
    began = time.monotonic()
    second = ingress.send_message(address, Message(SECOND, id=f"{address}-2", while_busy=policy))
    answered = ingress.attach(first if policy == "steer" else second)
    ms = (time.monotonic() - began) * 1000
    if answered.reply != ANSWER:
        raise BenchError(f"the {policy} case answered {answered.reply!r}, not {ANSWER!r}")
    made = [
        i
        for i in admin.finished_since(before, SETTLE)
        if i.target_service_key in (address, TENANT) and i.target_handler_name != "status"
    ]
    journals = admin.journals([invocation.id for invocation in made])
    handlers = Counter(f"{i.target_service_name}/{i.target_handler_name}" for i in made)
    return Case(
        policy,
        ms,
        len(made),
        sum(j.size.entries for j in journals),
        sum(j.size.bytes for j in journals),
        dict(handlers),
    )


def run(ingress: Ingress, admin: RestateAdmin, pairs: int, seconds: float) -> list[Case]:
    cases: list[Case] = []
    for pair in range(pairs):
        for policy in ("queue", "steer"):
            address = f"{TENANT}.{policy}-{pair}"
            cases.append(exchange(ingress, admin, address, policy, seconds))
    return cases


def summary(cases: Sequence[Case]) -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    for policy in ("queue", "steer"):
        mine = [c for c in cases if c.policy == policy]
        found[policy] = {
            "ms_p50": statistics.median(c.ms for c in mine),
            "ms_max": max(c.ms for c in mine),
            "invocations": statistics.median(c.invocations for c in mine),
            "entries": statistics.median(c.entries for c in mine),
            "bytes": statistics.median(c.bytes for c in mine),
            "by_handler": mine[-1].by_handler,
        }
    return found


def render(found: dict[str, dict[str, object]], pairs: int, seconds: float) -> str:
    lines = [
        f"{pairs} pairs, a first round of {seconds} s; medians over the pairs",
        "| case | send → answered, ms (p50 / max) | invocations | journal entries | bytes |",
        "|---|---|---|---|---|",
    ]
    for policy, row in found.items():
        lines.append(
            f"| {policy} | {row['ms_p50']:.0f} / {row['ms_max']:.0f} | {row['invocations']}"
            f" | {row['entries']} | {row['bytes']} |"
        )
    for policy, row in found.items():
        lines.append(f"{policy}: {row['by_handler']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.busy", description=__doc__)
    parser.add_argument("--pairs", type=int, default=5, help="pairs of exchanges (5)")
    parser.add_argument("--sleep", type=float, default=1.0, help="the slow round, s (1.0)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="teaspill-bench-") as home:
        settings = isolated_settings(Path(home), live_token="", observer_modules=())
        try:
            with (
                Stack(settings, gateway=False),
                closing(Ingress(settings.ingress_url)) as ingress,
                RestateAdmin(settings.admin_url) as admin,
            ):
                ingress.call(PUBLISH, SPEC, TENANT)
                admin.retain_journals(admin.services())
                cases = run(ingress, admin, args.pairs, args.sleep)
        except BenchError as error:
            print(f"bench.busy: {error}", file=sys.stderr)
            return 1
    found = summary(cases)
    print(render(found, args.pairs, args.sleep))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cases], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
