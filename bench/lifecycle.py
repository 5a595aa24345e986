"""`python -m bench.lifecycle [--agents A] [--turns T]`: backup, restore, fork, delete and
the first answer of an archived agent.

Starts a stack in a temporary home, runs T scripted one-round turns on each of A agents
(eight at a time), then times, with the stack running: `backup create` (and the pause of
restate-server inside it, and the archive's size), a fork of one agent at its last event,
a delete of another, and the first answer of archived agents against that of live ones
(the median of a few each: the next turn, its state brought back first); then stops it,
restores the archive into a fresh home and times the restore and the restored home's first
start (deployments re-pointed, the projection rebuilt from Restate), and checks an agent's
timeline there. The figures are docs/benchmarks.md's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from schemas.lifecycle import ErasureRequest, ForkRequest
from schemas.spec import AgentSpec
from services.cli.lifecycle import restate_processes
from services.contracts import ARCHIVE, ERASE_AGENT, FORK, Empty
from services.ingress import Ingress
from services.lifecycle.backup import create_backup
from services.lifecycle.restore import restore_backup
from services.stack import Stack, isolated_settings

SPEC = AgentSpec("kept", "Answer.", model="script")
SAMPLES = 5


def _turns(ingress_url: str, address: str, turns: int) -> None:
    with closing(Ingress(ingress_url, timeout=120)) as ingress:
        ingress.message(address, "turn 1 of a conversation, a sentence or so long", SPEC)
        for n in range(2, turns + 1):
            ingress.message(address, f"turn {n} of a conversation, a sentence or so long")


def _answer_ms(ingress: Ingress, address: str) -> float:
    started = time.perf_counter()
    ingress.message(address, "one more turn, a sentence or so long")
    return (time.perf_counter() - started) * 1000


def _first_answers(ingress: Ingress, spare: list[str]) -> dict[str, float]:
    """The next answer of archived agents and of live ones, the median of each."""
    count = min(SAMPLES, len(spare) // 2)
    archived, live = spare[:count], spare[count : 2 * count]
    if not count:
        return {}
    started = time.perf_counter()
    for address in archived:
        ingress.call(ARCHIVE, Empty(), address)
    figures = {"archive_ms": (time.perf_counter() - started) * 1000 / count}
    figures["live_answer_ms"] = statistics.median(_answer_ms(ingress, a) for a in live)
    figures["archived_answer_ms"] = statistics.median(_answer_ms(ingress, a) for a in archived)
    figures["archived_vs_live"] = figures["archived_answer_ms"] / figures["live_answer_ms"]
    return figures


def run(agents: int, turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="teaspill-lifecycle-") as tmp:
        # The agents, the fork and the second stack's: above the tenant's default ceiling.
        first = isolated_settings(Path(tmp) / "first", tenant_agents=agents + 10)
        addresses = [f"acme.kept-{n}" for n in range(agents)]
        figures: dict[str, float] = {}
        archive = Path(tmp) / "backup.tar.gz"
        with Stack(first, gateway=False), closing(Ingress(first.ingress_url)) as ingress:
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda a: _turns(first.ingress_url, a, turns), addresses))
            figures["turns_s"] = time.perf_counter() - started
            started = time.perf_counter()
            about = {"endpoint_uris": [first.endpoint_url]}
            made = create_backup(first.home, archive, pids=restate_processes(first), about=about)
            figures["backup_s"] = time.perf_counter() - started
            figures["pause_s"] = made.pause_seconds
            figures["archive_mib"] = archive.stat().st_size / 2**20
            last = ingress.timeline(addresses[0]).last_seq
            started = time.perf_counter()
            ingress.call(FORK, ForkRequest(addresses[0], last), "acme.forked")
            figures["fork_ms"] = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            ingress.call(ERASE_AGENT, ErasureRequest(addresses[1], "bench"), "acme", patience=300)
            figures["delete_ms"] = (time.perf_counter() - started) * 1000
            figures |= _first_answers(ingress, addresses[2:-1])
        second = isolated_settings(Path(tmp) / "second", tenant_agents=agents + 10)
        started = time.perf_counter()
        restore_backup(archive, second.home)
        figures["restore_s"] = time.perf_counter() - started
        started = time.perf_counter()
        with Stack(second, gateway=False), closing(Ingress(second.ingress_url)) as ingress:
            figures["first_start_s"] = time.perf_counter() - started
            assert ingress.timeline(addresses[-1]).last_seq == 3 * turns
        return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lifecycle", description=__doc__)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args(argv)
    figures = run(args.agents, args.turns)
    print(f"{args.agents} agents x {args.turns} turns ({args.agents * args.turns} turns)")
    for name, value in figures.items():
        print(f"  {name:18} {value:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
