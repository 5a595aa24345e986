"""`python -m bench.disk [--turns N] [--agents A] [--keep-chunks K,...]`: how much a
stack's home grows per turn, with timeline retention off and on.

For each K (TEASPILL_TIMELINE_KEEP_CHUNKS; 0 is retention off; 0 and 64 by default),
starts a stack in a temporary home, runs N scripted turns spread over A agents (each turn
a calculator call and a reply: two rounds, as a small real turn), stops the stack so that
every store is flushed, and prints the bytes each part of the home holds (Restate's data
directory, the projection, the archive store where retired chunks go), before and after,
and their growth per 1,000 turns. The figures are docs/production.md's and
docs/benchmarks.md's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from schemas.spec import AgentSpec
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Stack, isolated_settings

SPEC = AgentSpec("disk", "Follow the script.", model="script", tools=("calculator",))
TURN = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}, as asked; a reply of a sentence or so, as agents write."},
)
PARTS = {
    "restate": ("restate-data", "restate"),
    "projection": ("projection.db", "projection.db-wal", "projection.db-shm"),
    "archive": ("archive",),
    "logs": ("logs",),
}


def size(path: Path) -> int:
    """Bytes the disk holds for the path: its allocated blocks, so a sparse file (the
    workspaces' filesystem image) counts what it uses rather than its apparent size."""
    if path.is_file():
        return path.stat().st_blocks * 512
    if path.is_dir():
        return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())
    return 0


def sizes(home: Path) -> dict[str, int]:
    """Bytes by part of the home; `other` is what no part names (workspaces, ledgers)."""
    found = {part: sum(size(home / name) for name in names) for part, names in PARTS.items()}
    found["other"] = size(home) - sum(found.values())
    found["total"] = size(home)
    return found


def run(turns: int, agents: int, keep: int) -> None:
    with tempfile.TemporaryDirectory(prefix="teaspill-disk-") as tmp:
        settings = isolated_settings(Path(tmp) / "home", timeline_keep_chunks=keep)
        stack = Stack(settings).up(lambda line: None)
        ingress = Ingress(settings.ingress_url, timeout=120)
        try:
            for n in range(agents):  # each agent's first turn: not counted
                ingress.message(f"acme.disk-{n}", TURN, SPEC)
            stack.down()
            before = sizes(settings.home)
            stack = Stack(settings).up(lambda line: None)
            started = time.monotonic()
            for n in range(turns):
                ended = ingress.message(f"acme.disk-{n % agents}", TURN)
                if "42" not in ended.reply:
                    raise SystemExit(f"turn {n} did not end as scripted: {ended}")
            seconds = time.monotonic() - started
        finally:
            ingress.close()
            stack.down()
        after = sizes(settings.home)
    kept = f"the newest {keep} timeline chunks kept in Restate" if keep else "retention off"
    print(f"{turns} turns on {agents} agents in {seconds:.0f} s (2 rounds each), {kept}")
    print(f"{'part':12} {'before':>12} {'after':>12} {'per 1,000 turns':>16}")
    for part in after:
        grown = (after[part] - before[part]) * 1000 / turns
        print(f"{part:12} {before[part]:>12,} {after[part]:>12,} {grown:>16,.0f}")


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m bench.disk", description=__doc__)
    cli.add_argument("--turns", type=int, default=1000)
    cli.add_argument("--agents", type=int, default=10)
    cli.add_argument("--keep-chunks", default="0,64", help="K,...: a run for each")
    args = cli.parse_args(argv)
    for keep in (int(k) for k in args.keep_chunks.split(",")):
        run(args.turns, args.agents, keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
