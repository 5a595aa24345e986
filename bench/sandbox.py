"""`python -m bench.sandbox [--against CHECKOUT]`: what the hardened sandbox costs a
command, against another checkout's sandbox (for example the one before it).

Per command, p50 and p95 of two workloads, each through `run_sandboxed`:
- `true`, without network;
- one outbound connection: a command that connects to a server and reads its greeting,
  with network on (the target allowed where the sandbox has an allow-list).

Both run inside a network of the benchmark's own (`bench.netns`: the target is 10.77.0.3
in a namespace of its own), so nothing leaves it, for either checkout. The checkouts take
turns in ROUNDS rounds so that the machine's load falls on both alike. Needs root.

The measuring half runs as a script with the checkout on PYTHONPATH
(`python bench/sandbox.py --measure N`) and imports only `schemas` and `services`, so it
runs against a checkout that has no `bench.netns`.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 5
TARGET = "10.77.0.3"
PORT = 8080
CONNECT = (
    f"python3 -c \"import socket; s = socket.create_connection(('{TARGET}', {PORT}), 3); "
    "assert s.recv(100).startswith(b'hello')\""
)


def measure(runs: int) -> dict[str, list[float]]:
    """Milliseconds per command, each workload `runs` times, with whatever `services` is
    on the path."""
    from schemas.sandbox import CommandLimits  # noqa: PLC0415
    from services.workspace.files import open_workspace  # noqa: PLC0415
    from services.workspace.sandbox import Mounts, run_sandboxed  # noqa: PLC0415

    extra: dict[str, object] = {}
    if "allowed" in inspect.signature(run_sandboxed).parameters:
        from schemas.sandbox import parse_allowed  # noqa: PLC0415

        extra["allowed"] = (parse_allowed(f"{TARGET}:{PORT}"),)
    timings: dict[str, list[float]] = {"true": [], "connect": []}
    with tempfile.TemporaryDirectory() as home:
        workspace = open_workspace(Path(home), "bench.sandbox", 2**20)
        plain = Mounts(workspace.root, workspace.uid)
        networked = Mounts(workspace.root, workspace.uid, network=True)

        async def one(name: str, mounts: Mounts, command: str) -> None:
            kwargs = extra if mounts.network else {}
            started = time.perf_counter()
            outcome = await run_sandboxed(
                mounts, "bwrap", command, limits=CommandLimits(), file_bytes=2**20,
                stopped=lambda: False, **kwargs,  # type: ignore[arg-type]
            )  # fmt: skip
            timings[name].append((time.perf_counter() - started) * 1000)
            if outcome.exit_code != 0:
                raise SystemExit(f"{name} failed: {outcome.output.decode(errors='replace')}")

        async def all_runs() -> None:
            for _ in range(runs):
                await one("true", plain, "true")
                await one("connect", networked, CONNECT)

        asyncio.run(all_runs())
    return timings


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
    return {"p50_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2)}


def compare(checkouts: dict[str, Path], runs: int) -> dict[str, object]:
    from bench.netns import own_network  # noqa: PLC0415

    gathered: dict[str, dict[str, list[float]]] = {
        name: {"true": [], "connect": []} for name in checkouts
    }
    with own_network("bench") as network:
        for _ in range(ROUNDS):
            for name, checkout in checkouts.items():
                ran = network.run(
                    sys.executable, __file__, "--measure", str(max(1, runs // ROUNDS)),
                    pythonpath=checkout, timeout=1800,
                )  # fmt: skip
                if ran.returncode != 0:
                    raise SystemExit(f"{name}: {ran.stderr.strip()[-2000:]}")
                for workload, values in json.loads(ran.stdout).items():
                    gathered[name][workload] += values
    return {
        name: {workload: _spread(values) for workload, values in timings.items()}
        for name, timings in gathered.items()
    } | {"runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="samples per workload")
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        json.dump(measure(args.measure), sys.stdout)
        return
    checkouts = {"this": Path(__file__).resolve().parents[1]}
    if args.against:
        checkouts["against"] = args.against.resolve()
    json.dump(compare(checkouts, args.runs), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
