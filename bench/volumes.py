"""`python -m bench.volumes [--runs N] [--files F]`: what the workspaces' own filesystem
(the btrfs image, each workspace a subvolume with a quota group) costs a command, against
plain folders.

Per command, p50 and p95 of `true` through `WorkspaceHost.perform` (the whole call: the
workspace opened and its limit set, the snapshots before and after, the sandbox), in a
workspace holding F small files (the folder checks walk them; the image's kernel quota
needs no walk of its own), for a host whose workspaces are plain folders and one whose
workspaces are subvolumes of an image mounted in a temporary home. The two take turns,
one command each. Needs root (the image is loop-mounted), and is unmounted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from schemas.chat import ToolCall
from schemas.sandbox import WorkspaceSettings
from schemas.workspace import WorkspaceCall
from services.workspace.tools import WorkspaceHost
from services.workspace.volumes import prepare, release


def _call(command: str, index: int) -> WorkspaceCall:
    return WorkspaceCall(
        "bench.volumes",
        ToolCall(f"c{index}", "run_command", {"command": command}),
        f"bench-{index}",
        WorkspaceSettings(quota_mb=256),
    )


async def _timed(host: WorkspaceHost, command: str, index: int) -> float:
    started = time.perf_counter()
    reply = await host.perform(_call(command, index), lambda: False)
    if reply.result.status != "ok":
        raise SystemExit(f"the command failed: {reply.result.content}")
    return (time.perf_counter() - started) * 1000


async def _measure(hosts: dict[str, WorkspaceHost], runs: int, files: int) -> dict[str, object]:
    fill = f"for i in $(seq {files}); do echo $i > f$i; done" if files else "true"
    for host in hosts.values():
        await _timed(host, fill, -1)
    timings: dict[str, list[float]] = {name: [] for name in hosts}
    for index in range(runs):
        for name, host in hosts.items():
            timings[name].append(await _timed(host, "true", index))
    return {name: _spread(values) for name, values in timings.items()}


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
    return {"p50_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2)}


def run(runs: int, files: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folders, tempfile.TemporaryDirectory() as imaged:
        volumes = prepare(Path(imaged), "image", 4096)
        assert volumes is not None
        try:
            hosts = {
                "folder": WorkspaceHost(Path(folders), "bwrap"),
                "image": WorkspaceHost(Path(imaged), "bwrap", volumes=volumes),
            }
            measured = asyncio.run(_measure(hosts, runs, files))
        finally:
            volumes.close()
            release(Path(imaged))
    return measured | {"runs": runs, "files": files}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.volumes", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="commands per host")
    parser.add_argument("--files", type=int, default=0, help="files in each workspace")
    args = parser.parse_args()
    json.dump(run(args.runs, args.files), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
