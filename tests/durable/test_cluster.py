"""The cluster layout on one machine: three Restate nodes, two endpoint replicas behind
HAProxy, two gateways, PostgreSQL as the read side. Turns run through every node's
ingress, and survive SIGKILL of a node and of an endpoint replica mid-tool without a side
effect twice; a follower on each gateway sees every event once and the live text, taken
back and streamed again when the round falls back to another model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec
import pytest

from schemas.address import tenant_of
from schemas.events import Event, ModelMessage, TurnEnded
from schemas.live import LiveDelta, Retraction
from schemas.wake import Message
from services.client.stream import FrameParser, decode
from services.executor.scripted import script
from services.ingress import Ingress, IngressError
from services.stack import isolated_settings, settings_env
from services.stack.cluster import Cluster, Layout
from tests.durable.conftest import LiveStack, eventually, stack_settings
from tests.durable.test_crash import SPEC, assert_turn_survived, ledger_calls, lines_for, read
from tests.fixtures.models import STUTTER
from tests.fixtures.tools import ledger_path, open_gate, started_by_path, started_path
from tests.gateway.test_stack import made_key

pytestmark = pytest.mark.durable

AGENTS = 4


LIVE_TOKEN = "cluster-live-token"  # noqa: S105 - a test value
STUTTERING = msgspec.structs.replace(SPEC, kind="stutter", model="stutter", fallback=("script",))
"""Each round's first try breaks off mid-reply; the scripted model takes the round over."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    settings = stack_settings(tmp_path_factory.mktemp("cluster"))
    settings = settings.model_copy(update={"live_token": LIVE_TOKEN})
    with Cluster(settings, Layout.free(settings)) as running:
        yield running


class PatientIngress(Ingress):
    """An ingress client that, as one should in a failover, asks again (for up to 30 s)
    when ingress answers 5xx: a node that led the partition was just lost. `refused`
    counts the 5xx answers."""

    refused = 0

    def _post(
        self, path: str, body: bytes, idempotency_key: str | None, patience: float | None = None
    ) -> bytes:
        deadline = time.monotonic() + 30
        while True:
            try:
                return super()._post(path, body, idempotency_key, patience)
            except IngressError as error:
                if error.status < httpx.codes.INTERNAL_SERVER_ERROR:
                    raise
                if time.monotonic() > deadline:
                    raise
                PatientIngress.refused += 1
                time.sleep(0.2)


@contextmanager
def live_on(cluster: Cluster) -> Iterator[LiveStack]:
    """The cluster as the durable helpers read it: through the proxy's ingress; every
    part running again first (a test before may have killed some)."""
    for part in [*cluster.nodes, *cluster.endpoints]:
        if not part.running:
            part.start()
    with closing(PatientIngress(cluster.settings.ingress_url)) as ingress:
        yield LiveStack(cluster.settings, cluster.nodes[0], cluster.endpoints[0], ingress)


@pytest.fixture
def live(cluster: Cluster) -> Iterator[LiveStack]:
    with live_on(cluster) as running:
        yield running


@pytest.fixture
def unkilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own, where no node was killed and started again: a node started
    again takes its partitions back at a moment of its own, and the calls in flight on
    them then are cut (and end unknown), which a kill test could not tell from its own
    kill's."""
    settings = stack_settings(tmp_path_factory.mktemp("unkilled"))
    with Cluster(settings, Layout.free(settings), gateways=False) as running:
        yield running


def test_turns_complete_through_every_nodes_ingress(
    cluster: Cluster, live: LiveStack, address: str
) -> None:
    for node in cluster.layout.nodes:
        with closing(Ingress(node.ingress_url)) as ingress:
            ingress.send_wake(
                f"{address}-{node.name}", Message(ledger_calls(("once", 0)), spec=SPEC)
            )
    for node in cluster.layout.nodes:
        each = f"{address}-{node.name}"
        assert live.wait_for_turn_end(each, 1).outcome == "succeeded"
        events = live.events(each)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert lines_for(read(ledger_path(live.home)), each) == ["once"]


def kill_mid_call(cluster: Cluster, live: LiveStack, address: str, node: int) -> float:
    """Every agent inside its slow call (sent through each node's ingress in turn; the
    calls wait at a gate, so none can end before the kills), then SIGKILL of `node` and of
    the endpoint replica running most of those calls, then the gate opened; every turn
    must end with each call run at most once. Returns the seconds from the kills to a new
    turn's end through the proxy."""
    addresses = [f"{address}-{n}" for n in range(AGENTS)]
    gate = f"{address}-during"
    calls = [{"entry": "before"}, {"entry": "during", "gate": gate}, {"entry": "after"}]
    rounds = [{"calls": [{"name": "ledger", "arguments": call}]} for call in calls]
    text = script(*rounds, {"reply": "done: {results}"})
    for n, each in enumerate(addresses):
        ingress_url = cluster.layout.nodes[n % len(cluster.layout.nodes)].ingress_url
        with closing(Ingress(ingress_url)) as ingress:
            ingress.send_wake(each, Message(text, spec=SPEC))

    def all_inside() -> bool | None:
        started = read(started_path(live.home))
        return all("during" in lines_for(started, each) for each in addresses) or None

    eventually(all_inside, 120, "every agent's slow call to start")
    groups = {each: os.getpgid(pid) for each, pid in slow_call_pids(live.home, addresses).items()}
    # The replica that runs most of the slow calls (HAProxy may have put them all on one).
    killed_group = Counter(groups.values()).most_common(1)[0][0]
    replica = next(e for e in cluster.endpoints if e.pid == killed_group)
    cluster.nodes[node].kill()
    replica.kill()
    killed = time.monotonic()
    ledger = read(ledger_path(live.home))
    assert not [each for each in addresses if "during" in lines_for(ledger, each)], "gated"
    open_gate(live.home, gate)
    probe = f"{address}-probe"
    wake = Message(script({"reply": "here"}), spec=SPEC)
    # Sent as a client should in a failover: again, with the same key, while refused.
    PatientIngress.refused = 0
    live.ingress.send_wake(probe, wake, idempotency_key=f"{probe}-wake")
    live.wait_for_turn_end(probe, 1)
    failover = time.monotonic() - killed

    for each in addresses:
        # A call on the live replica may be cut too: the killed node may have held its
        # invocation, which is then retried and finds the call started.
        assert_turn_survived(live, each, interrupted=True)
    cut = {each for each, group in groups.items() if group == killed_group}
    assert cut, "the killed replica was running some of the slow calls"

    def survivors_done() -> bool | None:
        ledger = read(ledger_path(live.home))
        return all("during" in lines_for(ledger, each) for each in set(addresses) - cut) or None

    eventually(survivors_done, 60, "the calls on the live replica to finish")
    ledger = read(ledger_path(live.home))
    assert not [each for each in cut if "during" in lines_for(ledger, each)], "killed mid-call"
    for path in (started_path, ledger_path):
        lines = read(path(live.home))
        for each in addresses:
            counts = Counter(lines_for(lines, each))
            assert counts["before"] == counts["after"] == 1, f"{each} ({path(live.home).name})"
            assert counts["during"] <= 1, f"{each}'s slow call ran twice ({path(live.home).name})"
    return failover


def slow_call_pids(home: Path, addresses: list[str]) -> dict[str, int]:
    """The process running each agent's slow call."""
    found: dict[str, int] = {}
    for line in read(started_by_path(home)):
        key, entry, pid = line.split("\t")
        agent = key.split("/t")[0]
        if entry == "during" and agent in addresses:
            found[agent] = int(pid)
    return found


def test_sigkill_of_a_node_and_an_endpoint_mid_call_loses_and_repeats_nothing(
    cluster: Cluster, live: LiveStack, address: str, record_property: Callable[[str, object], None]
) -> None:
    failover = kill_mid_call(cluster, live, address, node=1)
    record_property("new turn ended after SIGKILL of n2 and a replica (s)", round(failover, 1))
    record_property("ingress answers 5xx after SIGKILL of n2, asked again", PatientIngress.refused)


def test_sigkill_of_the_provisioning_node_and_an_endpoint_mid_call(
    unkilled: Cluster, address: str, record_property: Callable[[str, object], None]
) -> None:
    with live_on(unkilled) as live:
        failover = kill_mid_call(unkilled, live, address, node=0)
    record_property("new turn ended after SIGKILL of n1 and a replica (s)", round(failover, 1))
    record_property("ingress answers 5xx after SIGKILL of n1, asked again", PatientIngress.refused)


@dataclass
class Followed:
    """What one SSE follower of one gateway received, until `until`'s turn ended: every
    recorded event and every live item, in order. `registered` is set with the first
    recorded event: the gateway registers a follower before it replays anything, so from
    then on nothing the agent does can pass it by."""

    url: str
    address: str
    auth: dict[str, str]
    after: int
    until: int
    items: list[Event | LiveDelta | Retraction] = field(default_factory=list)
    registered: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        try:
            self._read()
        except BaseException as error:  # noqa: BLE001 - raised by the test's thread
            self.error = error
        finally:
            self.registered.set()

    def _read(self) -> None:
        """Connected again, as an SSE client is, while the gateway answers 503: after the
        kills of the tests before, a restarted node may not answer the gateway's key check
        for a moment."""
        deadline = time.monotonic() + 60
        while not self._stream() and time.monotonic() < deadline:
            self.registered.wait(0.2)  # a reconnect's backoff
        assert self.items, f"{self.url} answered 503 for 60 s"

    def _stream(self) -> bool:
        """One connection; False if the gateway answered 503."""
        path = f"/v1/agents/{self.address}/events?after={self.after}"
        with httpx.stream("GET", f"{self.url}{path}", headers=self.auth, timeout=60) as answer:
            if answer.status_code == httpx.codes.SERVICE_UNAVAILABLE:
                return False
            assert answer.status_code == httpx.codes.OK, answer.read()
            parser = FrameParser()
            for line in answer.iter_lines():
                frame = parser.line(line)
                item = decode(frame) if frame is not None else None
                if item is None:
                    continue
                self.items.append(item)
                if isinstance(item, Event):
                    self.registered.set()
                    if isinstance(item.body, TurnEnded) and item.turn == self.until:
                        break
        return True

    def events(self) -> list[Event]:
        return [item for item in self.items if isinstance(item, Event)]

    def shown(self, turn: int, round_: int) -> str:
        """The round's live text as the follower would show it: what came after its last
        retraction, checked to be contiguous from offset 0."""
        text = ""
        for item in self.items:
            if isinstance(item, Event) or (item.turn, item.round) != (turn, round_):
                continue
            if isinstance(item, Retraction):
                text = ""
            else:
                assert item.offset == len(text), f"a gap or a repeat on {self.url}: {item}"
                text += item.text
        return text

    def first(self, what: str) -> int:
        """Where the first item of a kind is: the first try's text (`stutter`, the first
        attempt's), its retraction, the reply's text, the recorded reply (`message`)."""
        attempts = [item.attempt for item in self.items if isinstance(item, LiveDelta)]
        for index, item in enumerate(self.items):
            if isinstance(item, Retraction):
                kind = "retract"
            elif isinstance(item, LiveDelta):
                kind = "stutter" if item.attempt == attempts[0] else "reply"
            else:
                kind = "message" if isinstance(item.body, ModelMessage) else ""
            if kind == what:
                return index
        raise AssertionError(f"{self.url} sent no {what}: {self.items}")


def test_a_follower_on_each_gateway_sees_the_live_text_taken_back_and_every_event_once(
    cluster: Cluster, live: LiveStack, address: str
) -> None:
    gateways = [g.url for g in cluster.gateways]
    with httpx.Client(base_url=gateways[0]) as http:
        key = made_key(cluster.settings, http, tenant_of(address), "admin")
    auth = {"Authorization": f"Bearer {key}"}
    live.ingress.send_wake(address, Message(script({"reply": "first"}), spec=STUTTERING))
    live.wait_for_turn_end(address, 1)
    last = len(live.events(address))
    followers = [Followed(url, address, auth, after=last - 1, until=2) for url in gateways]
    threads = [threading.Thread(target=f.run, daemon=True) for f in followers]
    for thread in threads:
        thread.start()
    for follower in followers:
        assert follower.registered.wait(60), f"{follower.url} did not replay event {last}"
        assert follower.error is None, follower.error

    reply = "Every gateway streams this, word by word."
    live.ingress.send_wake(address, Message(script({"reply": reply}), spec=STUTTERING))
    live.wait_for_turn_end(address, 2)
    for thread in threads:
        thread.join(60)
    recorded = live.events(address)[last - 1 :]
    for follower in followers:
        assert follower.error is None, f"{follower.url}: {follower.error}"
        assert follower.events() == recorded, f"{follower.url}: every event once, in order"
        order = [follower.first(kind) for kind in ("stutter", "retract", "reply", "message")]
        assert order == sorted(order), f"{follower.url}: {follower.items}"
        stutter = follower.items[follower.first("stutter")]
        assert isinstance(stutter, LiveDelta)
        assert STUTTER.startswith(stutter.text.strip()), stutter
        assert follower.shown(2, 1) == reply, f"{follower.url}: {follower.items}"


def teaspill(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


CLERK = """
kind = "clerk"
instructions = "Follow the script."
model = "script"
"""


def test_up_cluster_status_down(tmp_path: Path) -> None:
    env = {**os.environ, **settings_env(isolated_settings(tmp_path / "home"))}
    missing = teaspill(
        {**env, "TEASPILL_HAPROXY": str(tmp_path / "no-haproxy")}, "up", "--cluster", "--detach"
    )
    assert missing.returncode == 1
    assert "haproxy is not installed" in missing.stderr
    assert not (tmp_path / "home" / "stack.json").exists(), "nothing was started"
    no_postgres = teaspill(
        {**env, "TEASPILL_POSTGRES_BIN": str(tmp_path / "no-postgres")},
        "up",
        "--cluster",
        "--detach",
    )
    assert no_postgres.returncode == 1
    assert "PostgreSQL is not installed" in no_postgres.stderr
    assert not (tmp_path / "home" / "stack.json").exists(), "nothing was started"
    assert not (tmp_path / "home" / "postgres").exists(), "nothing was made"

    up = teaspill(env, "up", "--cluster", "--detach")
    assert up.returncode == 0, up.stderr
    pids = json.loads((tmp_path / "home" / "stack.json").read_text())["pids"]
    try:
        assert set(pids) == {
            "gateway-g1",
            "gateway-g2",
            "restate-n1",
            "restate-n2",
            "restate-n3",
            "haproxy",
            "endpoint-e1",
            "endpoint-e2",
            "postgres",
        }
        status = teaspill(env, "status")
        assert status.returncode == 0, status.stdout
        shown = [line.split()[0:2] for line in status.stdout.splitlines()]
        assert [" ".join(name) for name in shown if name[0] != "deployment"] == [
            "postgres up",
            "restate n1",
            "ingress n1",
            "restate n2",
            "ingress n2",
            "restate n3",
            "ingress n3",
            "proxy ingress",
            "proxy admin",
            "proxy endpoint",
            "endpoint e1",
            "endpoint e2",
            "gateway g1",
            "gateway g2",
        ]
        assert sum(name[0] == "deployment" for name in shown) == 1, "registered once"
        assert (tmp_path / "home" / "cluster" / "haproxy.cfg").is_file()
        assert not (tmp_path / "home" / "projection.db").exists(), "the read side is PostgreSQL"
        spec = tmp_path / "clerk.toml"
        spec.write_text(CLERK)
        text = script({"reply": "Both gateways read this."})
        sent = teaspill(env, "send", "acme.clerk", text, "--spec", str(spec))
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.strip() == "Both gateways read this."
        after = teaspill(env, "status").stdout.splitlines()
        gateways = [line for line in after if line.startswith("gateway g")]
        assert [line.split()[2] for line in gateways] == ["up", "up"]
        assert not [line for line in gateways if "no agent has run yet" in line], after
    finally:
        down = teaspill(env, "down")
    assert down.returncode == 0, down.stderr
    assert not [name for name, pid in pids.items() if alive(pid)]
    assert (
        "database system is shut down" in (tmp_path / "home" / "logs" / "postgres.log").read_text()
    )
    assert teaspill(env, "status").returncode == 1
