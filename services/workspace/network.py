"""Outbound network for a sandbox that may have it, and nothing of the host's networks.

bwrap gives the sandbox a network namespace of its own (`--unshare-net`) and waits
(`--block-fd`) before it runs the command. Meanwhile, from outside, the firewall is set
in that namespace (`nft`, run in it with `nsenter` as root: the command, without
capabilities, cannot change it), then `slirp4netns` attaches a user-mode network stack
with the host's loopback disabled and IPv6 on, and `ip` sets its IPv6 address and route
(at once, where slirp4netns' router advertisement would take seconds); only then does the
command start. Outbound packets to
loopback, link-local and private ranges are rejected in the namespace before they reach
slirp4netns, except to the operator's allow-list; DNS goes to slirp4netns' own resolver.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from pathlib import Path

from schemas.sandbox import Allowed

BLOCKED_V4 = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/3",
)  # fmt: skip
BLOCKED_V6 = ("::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10", "ff00::/8")
NEIGHBOUR_DISCOVERY = ("nd-router-solicit", "nd-neighbor-solicit", "nd-neighbor-advert")
IPV6_ADDRESS = "fd00::100/64"
IPV6_GATEWAY = "fd00::2"
"""slirp4netns' IPv6 network (with --enable-ipv6); its gateway is in fc00::/7, which the
firewall blocks as a destination, not as the next hop of a public one."""
RESOLVER = "10.0.2.3"
"""slirp4netns' DNS forwarder, inside the 10.0.2.0/24 it configures."""
RESOLV_CONF = f"nameserver {RESOLVER}\n"
SETUP_SECONDS = 10.0


class NetworkUnavailableError(Exception):
    """The sandbox's network cannot be set up; the message is a sentence."""


def ruleset(allowed: tuple[Allowed, ...]) -> str:
    """The namespace's firewall: its own loopback and the resolver, the allow-list, then
    every blocked range rejected (a connect fails at once)."""
    lines = [
        'oifname "lo" accept',
        f"ip daddr {RESOLVER} meta l4proto {{ tcp, udp }} th dport 53 accept",
        # Neighbour discovery finds slirp4netns' IPv6 gateway (multicast, link-local).
        f"icmpv6 type {{ {', '.join(NEIGHBOUR_DISCOVERY)} }} accept",
    ]
    for rule in allowed:
        family = "ip" if rule.network.version == 4 else "ip6"
        where = f"{family} daddr {rule.network}"
        if rule.port is None:
            lines.append(f"{where} accept")
        else:
            lines.append(f"{where} meta l4proto {{ tcp, udp }} th dport {rule.port} accept")
    lines.append(f"ip daddr {{ {', '.join(BLOCKED_V4)} }} reject")
    lines.append(f"ip6 daddr {{ {', '.join(BLOCKED_V6)} }} reject")
    body = "\n".join(f"    {line}" for line in lines)
    return (
        "table inet sandbox {\n  chain out {\n"
        "    type filter hook output priority 0; policy accept;\n"
        f"{body}\n  }}\n}}\n"
    )


def programs() -> tuple[str, str, str, str]:
    """nsenter, nft, slirp4netns and ip; a sentence naming what is missing otherwise."""
    names = ("nsenter", "nft", "slirp4netns", "ip")
    found = [shutil.which(name) for name in names]
    missing = [name for name, path in zip(names, found, strict=True) if not path]
    if missing:
        raise NetworkUnavailableError(
            f"Commands with network cannot run: {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed, and "
            "a sandbox never gets the network without its own firewalled namespace. Install "
            "them (Debian: apt-get install util-linux nftables slirp4netns iproute2)."
        )
    nsenter, nft, slirp, ip = (str(path) for path in found)
    return nsenter, nft, slirp, ip


class Attached:
    """The user-mode network stack of one sandbox; `close` ends it."""

    def __init__(self, slirp: asyncio.subprocess.Process, exit_fd: int) -> None:
        self._slirp = slirp
        self._exit_fd = exit_fd

    async def close(self) -> None:
        if self._exit_fd >= 0:
            exit_fd, self._exit_fd = self._exit_fd, -1
            with contextlib.suppress(OSError):
                os.close(exit_fd)  # slirp4netns exits when this closes
        try:
            await asyncio.wait_for(self._slirp.wait(), SETUP_SECONDS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._slirp.kill()
            await self._slirp.wait()


async def attach(pid: int, allowed: tuple[Allowed, ...]) -> Attached:
    """Firewall the network namespace of `pid`, then give it slirp4netns."""
    nsenter, nft, slirp, ip = programs()
    await asyncio.to_thread(_loopback_up, pid, time.monotonic() + SETUP_SECONDS)
    inside = (nsenter, f"--net=/proc/{pid}/ns/net")
    await _in_namespace((*inside, nft, "-f", "-"), ruleset(allowed), "its firewall")
    attached = await _slirp(slirp, pid)
    try:
        await _in_namespace((*inside, ip, "-6", "-batch", "-"), IPV6_SETUP, "its IPv6 address")
    except (NetworkUnavailableError, TimeoutError):
        await attached.close()
        raise
    return attached


IPV6_SETUP = (
    f"addr replace {IPV6_ADDRESS} dev tap0 nodad\n"
    f"route replace default via {IPV6_GATEWAY} dev tap0\n"
)
"""slirp4netns' IPv6 network, set at once: its router advertisement and duplicate address
detection would leave a command without IPv6 for its first seconds."""


async def _in_namespace(argv: tuple[str, ...], script: str, what: str) -> None:
    """Run `argv` (nft or ip, in the sandbox's namespace) on `script`; a sentence naming
    `what` could not be set when it fails."""
    setup = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        said, _ = await asyncio.wait_for(setup.communicate(script.encode()), SETUP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            setup.kill()
        await setup.wait()
        raise
    if setup.returncode != 0:
        raise NetworkUnavailableError(
            f"Commands with network cannot run: the sandbox's {what} could not be set "
            f"({said.decode(errors='replace').strip()[:300] or 'no reason given'})."
        )


async def _slirp(slirp: str, pid: int) -> Attached:
    read_ready, write_ready = os.pipe()
    read_exit, write_exit = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            slirp, "--configure", "--disable-host-loopback", "--mtu=65520", "--enable-ipv6",
            f"--ready-fd={write_ready}", f"--exit-fd={read_exit}", str(pid), "tap0",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            pass_fds=(write_ready, read_exit),
        )  # fmt: skip
    finally:
        os.close(write_ready)
        os.close(read_exit)
    attached = Attached(process, write_exit)
    ready = await asyncio.wait_for(asyncio.to_thread(_read_byte, read_ready), SETUP_SECONDS)
    if ready != b"1":
        await attached.close()
        raise NetworkUnavailableError(
            "Commands with network cannot run: slirp4netns did not attach to the sandbox."
        )
    return attached


def _loopback_up(pid: int, deadline: float) -> None:
    """Wait until bwrap has set up the namespace's loopback: changing the namespace while
    bwrap still talks to it over netlink made bwrap fail ("Failed RTM_NEWADDR")."""
    table = Path(f"/proc/{pid}/net/fib_trie")
    while True:
        try:
            if "127.0.0.1" in table.read_text():
                return
        except FileNotFoundError:
            return  # bwrap ended: its status says why
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.001)


def _read_byte(fd: int) -> bytes:
    try:
        return os.read(fd, 1)
    finally:
        os.close(fd)
