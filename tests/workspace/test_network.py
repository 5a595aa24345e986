"""A sandbox with network, with real bwrap, nft and slirp4netns, inside a network of the
test's own (`bench.netns`: two namespaces holding private and link-local addresses, so
nothing the sandbox sends leaves them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from bench.netns import Network, own_network
from schemas.sandbox import parse_allowed
from services.workspace.network import ruleset


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    with own_network(f"w{os.getpid() % 100000}") as made:
        yield made


def probe(network: Network, *allowed: str) -> dict[str, str]:
    ran = network.run(".venv/bin/python", "-m", "bench.netns", *allowed)
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["exit_code"] == 0, answer
    found: dict[str, str] = answer["found"]
    return found


def test_private_and_link_local_addresses_are_unreachable_but_the_allowed_one(
    network: Network,
) -> None:
    found = probe(network, "10.77.0.3:8080")
    assert found == {
        "10.77.0.2": "Connection refused",
        "10.77.0.3": "hello from 10.77.0.3",
        "169.254.169.254": "Connection refused",
        "2001:db8:77::3": "hello from 2001:db8:77::3",  # as a public IPv6 address
        "fd77::3": "Connection refused",
    }


def test_the_refused_targets_are_there_when_the_operator_allows_them(network: Network) -> None:
    found = probe(network, "10.77.0.2/32", "169.254.169.254:8080", "[fd77::3]:8080")
    assert found["10.77.0.2"] == "hello from 10.77.0.2"
    assert found["169.254.169.254"] == "hello from 169.254.169.254"
    assert found["fd77::3"] == "hello from fd77::3"
    assert found["10.77.0.3"] == "Connection refused"


def test_the_firewall_rejects_every_blocked_range_after_the_allow_list() -> None:
    rules = ruleset((parse_allowed("[fd00::1]:80"),))
    allow = rules.index("ip6 daddr fd00::1/128 meta l4proto { tcp, udp } th dport 80 accept")
    for blocked in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"):
        assert rules.index(blocked) > allow
    for blocked in ("169.254.0.0/16", "::1/128", "fe80::/10", "fc00::/7"):
        assert rules.index(blocked) > allow


@pytest.mark.parametrize(
    "entry", ["10.1.2.3:0", "10.1.2.3:70000", "example.com:80", "10.1.2.300", "[fd00::1:80"]
)
def test_an_allow_list_entry_that_is_not_an_address_is_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="is not an address, a CIDR or address:port"):
        parse_allowed(entry)
