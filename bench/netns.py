"""A small network of its own for measuring and testing a sandbox with network: the
sandbox's side runs in namespace `outer`, whose only link leads to namespace `target`,
which holds private and link-local addresses and a server on each. Nothing leaves the
two namespaces, whatever the sandbox does. Needs root and `ip` (iproute2).

`python -m bench.netns ADDRESS...` inside `outer`: one sandboxed command (network on,
ADDRESS... allowed) connects to each target and prints what it found as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PORT = 8080
OUTER_ADDRESSES = ("10.77.0.1/24", "169.254.169.1/16", "2001:db8:77::1/64", "fd77::1/64")
TARGETS = ("10.77.0.2", "10.77.0.3", "169.254.169.254", "2001:db8:77::3", "fd77::3")
"""Private, link-local, and two IPv6 targets: one in the documentation range (routed as a
public address would be: the sandbox's firewall does not block it) and one unique local."""
PREFIXES = {"10.": 24, "169.": 16, "2001:": 64, "fd77:": 64}
SERVER = f"""
import socket
listener = socket.create_server(("::", {PORT}), family=socket.AF_INET6, dualstack_ipv6=True)
print("ready", flush=True)
while True:
    connection, _ = listener.accept()
    here = connection.getsockname()[0].removeprefix("::ffff:")
    connection.sendall(b"hello from " + here.encode())
    connection.close()
"""
PROBE = f"""
import json, socket
found = {{}}
for host in {TARGETS!r}:
    try:
        with socket.create_connection((host, {PORT}), 3) as connection:
            found[host] = connection.recv(100).decode()
    except OSError as error:
        found[host] = error.strerror or "failed"
print("PROBE " + json.dumps(found))
"""


@dataclass(frozen=True)
class Network:
    outer: str
    target: str

    def run(
        self, *argv: str, timeout: float = 60, pythonpath: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`argv` in the outer namespace, with this checkout (or `pythonpath`) on the path."""
        checkout = pythonpath or Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        return subprocess.run(
            ["ip", "netns", "exec", self.outer, *argv],
            capture_output=True, text=True, env=env, timeout=timeout, check=False,
        )  # fmt: skip


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, timeout=30)


def _nodad(address: str) -> tuple[str, ...]:
    """An IPv6 address usable at once, without waiting out duplicate address detection."""
    return ("nodad",) if ":" in address else ()


@contextlib.contextmanager
def own_network(tag: str) -> Iterator[Network]:
    """The two namespaces and the target's server; removed on the way out."""
    outer, target = f"tso-{tag}", f"tst-{tag}"
    near, far = f"tsa{tag}"[:15], f"tsb{tag}"[:15]
    server = None
    try:
        _ip("netns", "add", outer)
        _ip("netns", "add", target)
        _ip(
            "link",
            "add",
            near,
            "netns",
            outer,
            "type",
            "veth",
            "peer",
            "name",
            far,
            "netns",
            target,
        )
        for address in OUTER_ADDRESSES:
            _ip("-n", outer, "addr", "add", address, "dev", near, *_nodad(address))
        for address in TARGETS:
            prefix = next(n for start, n in PREFIXES.items() if address.startswith(start))
            _ip("-n", target, "addr", "add", f"{address}/{prefix}", "dev", far, *_nodad(address))
        for namespace, link in ((outer, near), (target, far)):
            _ip("-n", namespace, "link", "set", link, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", target, sys.executable, "-c", SERVER],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the target's server did not start")
        yield Network(outer, target)
    finally:
        if server is not None:
            server.kill()
            server.wait()
            if server.stdout is not None:
                server.stdout.close()
        for namespace in (outer, target):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)


def probe(allowed: tuple[str, ...]) -> dict[str, object]:
    """Run PROBE in a sandbox with network (in this process's namespace)."""
    import tempfile  # noqa: PLC0415

    from schemas.sandbox import CommandLimits, parse_allowed  # noqa: PLC0415
    from services.workspace.files import open_workspace  # noqa: PLC0415
    from services.workspace.sandbox import Mounts, run_sandboxed  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as home:
        workspace = open_workspace(Path(home), "bench.net", 2**20)
        mounts = Mounts(workspace.root, workspace.uid, network=True)
        started = time.perf_counter()
        outcome = asyncio.run(
            run_sandboxed(
                mounts, "bwrap", f"python3 - <<'EOF'\n{PROBE}\nEOF",
                limits=CommandLimits(), file_bytes=2**20, stopped=lambda: False,
                allowed=tuple(parse_allowed(entry) for entry in allowed),
            )
        )  # fmt: skip
        took = time.perf_counter() - started
    said = outcome.output.decode(errors="replace")
    lines = [line for line in said.splitlines() if line.startswith("PROBE ")]
    found = json.loads(lines[0].removeprefix("PROBE ")) if lines else {"output": said}
    return {"found": found, "exit_code": outcome.exit_code, "seconds": took}


if __name__ == "__main__":
    json.dump(probe(tuple(sys.argv[1:])), sys.stdout)
