"""The cluster layout on one machine (`teaspill up --cluster`): three restate-server nodes,
two replicas of the service endpoint and two gateways, with HAProxy in front of the
nodes' ingress and admin APIs and of the endpoint replicas.

Every node has every role and keeps the log on two of the three (`restate-cluster.toml`,
the template each node's config is made from), so any one node may be lost. The
deployment is registered once, at HAProxy's endpoint address: Restate calls whichever
replica HAProxy picks (h2c, health-checked), and a call cut short by a replica's end is
retried on the other. The endpoints and gateways reach Restate through HAProxy's ingress,
so losing a node costs them nothing but the calls it had open.

The read side is a PostgreSQL of the home's own (`services.stack.postgres`), which every
replica writes and every gateway reads and listens to, unless the settings name one
(`TEASPILL_PROJECTION_URL`).

Where the parts listen is the settings' ports for what the proxy serves (ingress, admin,
endpoint: the addresses every other part and the CLI already use) and for the first
gateway; each node and replica gets its own (`Layout.derived`). The single-node stack
(`services.stack.Stack`, restate.toml) is not changed by any of this.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template
from types import TracebackType
from typing import Any

from services.settings import Settings
from services.stack.endpoint import DEFAULT_APP, Endpoint
from services.stack.gateway import Gateway
from services.stack.postgres import Postgres, find_postgres
from services.stack.process import Part, StackError, answers, free_port
from services.stack.restate import (
    REPO,
    RestateServer,
    find_restate_server,
    register,
    restate_env,
)
from services.stack.restored import rebuild_projection, repoint, restored

TEMPLATE = REPO / "restate-cluster.toml"
HAPROXY_ENV = "TEASPILL_HAPROXY"
HAPROXY = "/usr/sbin/haproxy"
NODES = 3
REPLICAS = 2
GATEWAYS = 2
CHECK_INTERVAL_MS = 1000
"""How often HAProxy asks each backend for its health; two failures take it out."""
PROXY_TIMEOUT = "1h"
"""HAProxy's client and server timeouts: above Restate's inactivity and abort timeouts and
the endpoint's read timeout, so that the proxy never cuts a call either would keep."""


@dataclass(frozen=True)
class Node:
    """One restate-server node's name and ports."""

    name: str
    node_port: int
    ingress_port: int
    admin_port: int

    @property
    def ingress_url(self) -> str:
        return f"http://127.0.0.1:{self.ingress_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def node_url(self) -> str:
        return f"http://127.0.0.1:{self.node_port}"


@dataclass(frozen=True)
class Layout:
    """Where every part of the cluster listens, besides the proxy's three frontends
    (the settings' ingress, admin and endpoint ports)."""

    nodes: tuple[Node, ...]
    endpoints: tuple[int, ...]
    """The endpoint replicas' ports."""
    gateways: tuple[int, ...]
    """The gateways' ports; the first is the settings' gateway port."""
    postgres: int | None = None
    """The home's PostgreSQL's port; None when the settings name a PostgreSQL of their own
    (`TEASPILL_PROJECTION_URL`) and the layout starts none."""

    @classmethod
    def derived(cls, settings: Settings) -> Layout:
        """The ports next to the settings' own: node i (from 0) on node_port + i, its
        ingress on ingress_port + 1 + i and its admin API on admin_port + 1 + i; replica i
        on endpoint_port + 1 + i; gateway i on gateway_port + i; PostgreSQL on the port
        after the nodes', node_port + 3."""
        s = settings
        nodes = tuple(
            Node(f"n{i + 1}", s.node_port + i, s.ingress_port + 1 + i, s.admin_port + 1 + i)
            for i in range(NODES)
        )
        endpoints = tuple(s.endpoint_port + 1 + i for i in range(REPLICAS))
        gateways = tuple(s.gateway_port + i for i in range(GATEWAYS))
        postgres = None if s.projection_url else s.node_port + NODES
        return cls(nodes, endpoints, gateways, postgres)

    @classmethod
    def free(cls, settings: Settings) -> Layout:
        """Free ports for every part (tests): the first gateway keeps the settings' port."""
        nodes = tuple(
            Node(f"n{i + 1}", free_port(), free_port(), free_port()) for i in range(NODES)
        )
        endpoints = tuple(free_port() for _ in range(REPLICAS))
        gateways = (settings.gateway_port, *(free_port() for _ in range(GATEWAYS - 1)))
        return cls(nodes, endpoints, gateways, None if settings.projection_url else free_port())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, found: Mapping[str, Any]) -> Layout:
        return cls(
            tuple(Node(**node) for node in found["nodes"]),
            tuple(int(port) for port in found["endpoints"]),
            tuple(int(port) for port in found["gateways"]),
            int(found["postgres"]) if found.get("postgres") else None,
        )


def node_config(settings: Settings, layout: Layout, node: Node) -> str:
    """The node's config: `restate-cluster.toml` with its placeholders filled in."""
    try:
        template = Template(TEMPLATE.read_text())
    except OSError as error:
        raise StackError(f"The cluster's Restate template {TEMPLATE} cannot be read.") from error
    first = node == layout.nodes[0]
    return template.substitute(
        node_name=node.name,
        base_dir=str((settings.home / "cluster" / node.name).absolute()),
        node_port=node.node_port,
        ingress_port=node.ingress_port,
        admin_port=node.admin_port,
        auto_provision="true" if first else "false",
        metadata=json.dumps([n.node_url for n in layout.nodes]),
    )


class ClusterNode(RestateServer):
    """`restate-server --config-file <home>/cluster/<node>.toml`, logging to
    `<home>/logs/restate-<node>.log`, its data in `<home>/cluster/<node>`."""

    def __init__(self, settings: Settings, layout: Layout, node: Node) -> None:
        super().__init__(settings, config=settings.home / "cluster" / f"{node.name}.toml")
        self.log_path = settings.home / "logs" / f"restate-{node.name}.log"
        self.base_dir = settings.home / "cluster" / node.name
        self.node = node
        self.name = f"restate-server {node.name}"
        self.layout = layout

    def argv(self) -> list[str]:
        self.config.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config.write_text(node_config(self.settings, self.layout, self.node))
        return [str(find_restate_server()), "--config-file", str(self.config), "--no-logo"]

    def env(self) -> dict[str, str]:
        """The identity key and tracing of the single node; the ports and data directory
        are the node's own config's, so the single node's overrides are left out."""
        own = {
            name: value
            for name, value in restate_env(self.settings).items()
            if not name.startswith(("RESTATE_BASE_DIR", "RESTATE_BIND_PORT"))
            and "__BIND_PORT" not in name
        }
        return {**os.environ, **own}

    def ports(self) -> dict[str, tuple[int, str]]:
        n = self.node
        return {
            f"Restate {n.name} ingress": (n.ingress_port, "TEASPILL_INGRESS_PORT"),
            f"Restate {n.name} admin": (n.admin_port, "TEASPILL_ADMIN_PORT"),
            f"Restate {n.name} node": (n.node_port, "TEASPILL_NODE_PORT"),
        }

    def ready(self) -> bool:
        """The node's admin API answers `GET /health`."""
        return answers(f"{self.node.admin_url}/health")

    def serving(self) -> bool:
        """The node's ingress answers `GET /restate/health`."""
        return answers(f"{self.node.ingress_url}/restate/health")


def nodes_with_data(home: Path) -> list[str]:
    """The cluster's nodes whose data this home holds (`cluster/<node>`, not empty)."""
    found = home / "cluster"
    if not found.is_dir():
        return []
    return sorted(p.name for p in found.iterdir() if p.is_dir() and any(p.iterdir()))


def same_node_ports(settings: Settings, layout: Layout) -> None:
    """A StackError sentence unless every node that has data listens where it did: the
    nodes know each other (the metadata cluster's members, the log's) by their node-to-node
    addresses, kept in their data, so a node moved to another port is never found again."""
    recorded: dict[str, int] = {}
    with_data = nodes_with_data(settings.home)
    for node in layout.nodes:
        config = settings.home / "cluster" / f"{node.name}.toml"
        if node.name not in with_data or not config.is_file():
            continue
        try:
            recorded[node.name] = int(tomllib.loads(config.read_text())["bind-port"])
        except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError):
            continue
    moved = [n for n in layout.nodes if recorded.get(n.name, n.node_port) != n.node_port]
    if not moved:
        return
    said = ", ".join(f"{n.name}'s on {recorded[n.name]} (now {n.node_port})" for n in moved)
    first = recorded.get(layout.nodes[0].name)
    hint = f" Set TEASPILL_NODE_PORT={first}: node n1's, the others' follow it." if first else ""
    raise StackError(
        f"The cluster's data was made with other node-to-node ports: {said}. Its nodes know "
        f"each other by these ports, kept in their data, so they cannot move.{hint}"
    )


def find_haproxy() -> Path:
    """HAProxy: $TEASPILL_HAPROXY, else Debian's, else the one on PATH."""
    override = os.environ.get(HAPROXY_ENV)
    found = override or (HAPROXY if Path(HAPROXY).is_file() else shutil.which("haproxy"))
    if not found or not os.access(found, os.X_OK):
        raise StackError(
            "The cluster layout needs HAProxy in front of its nodes and endpoints, and "
            f"haproxy is not installed: run `make install` (Debian: `apt-get install "
            f"haproxy`), or set {HAPROXY_ENV} to its path."
        )
    return Path(found)


def haproxy_config(settings: Settings, layout: Layout) -> str:
    """HAProxy's config: the ingress and admin APIs balanced over every node, and the
    endpoint over the replicas in h2c; each backend health-checked."""
    s = settings
    check = f"check inter {CHECK_INTERVAL_MS} fall 2 rise 1"
    lines = [
        "# Made by `teaspill up --cluster` (services/stack/cluster.py) on every start.",
        "global",
        "    maxconn 4096",
        "    log stderr format short local0 info",
        "defaults",
        "    mode http",
        "    # Into logs/haproxy.log: failed and cut requests only, and backends going up or down.",
        "    log global",
        "    option httplog",
        "    option dontlog-normal",
        "    option redispatch",
        "    retries 3",
        "    timeout connect 2s",
        f"    timeout client {PROXY_TIMEOUT}",
        f"    timeout server {PROXY_TIMEOUT}",
        f"    timeout tunnel {PROXY_TIMEOUT}",
        "    timeout http-request 30s",
        "",
        "frontend ingress",
        f"    bind 127.0.0.1:{s.ingress_port}",
        "    default_backend nodes_ingress",
        "backend nodes_ingress",
        "    balance roundrobin",
        "    option httpchk GET /restate/health",
        *(f"    server {n.name} 127.0.0.1:{n.ingress_port} {check}" for n in layout.nodes),
        "",
        "frontend admin",
        f"    bind 127.0.0.1:{s.admin_port}",
        "    default_backend nodes_admin",
        "backend nodes_admin",
        "    balance roundrobin",
        "    option httpchk GET /health",
        *(f"    server {n.name} 127.0.0.1:{n.admin_port} {check}" for n in layout.nodes),
        "",
        "# Restate calls the endpoint in HTTP/2 without TLS (h2c); HTTP/1.1 (a health",
        "# probe) is served too.",
        "frontend endpoint",
        f"    bind 127.0.0.1:{s.endpoint_port}",
        "    default_backend endpoints",
        "# Least connections: an agent's invocation is one long stream, and the replicas",
        "# get as many of them each, where turns would put every one on the same replica.",
        "backend endpoints",
        "    balance leastconn",
        "    option httpchk",
        "    http-check send meth GET uri /health ver HTTP/1.1 hdr host localhost",
        *(
            f"    server e{i + 1} 127.0.0.1:{port} proto h2 {check}"
            for i, port in enumerate(layout.endpoints)
        ),
    ]
    return "\n".join(lines) + "\n"


class Proxy(Part):
    """`haproxy -db -f <home>/cluster/haproxy.cfg`, logging to `<home>/logs/haproxy.log`."""

    name = "haproxy"

    def __init__(self, settings: Settings, layout: Layout) -> None:
        super().__init__(settings, "haproxy")
        self.layout = layout
        self.config = settings.home / "cluster" / "haproxy.cfg"

    def argv(self) -> list[str]:
        binary = find_haproxy()
        self.config.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config.write_text(haproxy_config(self.settings, self.layout))
        return [str(binary), "-db", "-f", str(self.config)]

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def ports(self) -> dict[str, tuple[int, str]]:
        s = self.settings
        return {
            "the proxy's ingress": (s.ingress_port, "TEASPILL_INGRESS_PORT"),
            "the proxy's admin": (s.admin_port, "TEASPILL_ADMIN_PORT"),
            "the proxy's endpoint": (s.endpoint_port, "TEASPILL_ENDPOINT_PORT"),
        }

    def ready(self) -> bool:
        """Every frontend accepts connections."""
        return all(_accepts(port) for port, _ in self.ports().values())


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Cluster:
    """The cluster layout: nodes, endpoint replicas, HAProxy, registration once, then the
    gateways; `down` undoes it in reverse. `env` is added to every part's environment
    (the live token); the endpoints also tell every gateway of new events and push live
    text to every gateway."""

    def __init__(
        self,
        settings: Settings,
        layout: Layout | None = None,
        *,
        app: str = DEFAULT_APP,
        env: Mapping[str, str] | None = None,
        endpoint_env: Mapping[str, str] | None = None,
        gateways: bool = True,
    ) -> None:
        self.settings = settings
        self.layout = layout or Layout.derived(settings)
        extra = dict(env or {})
        gateway_urls = [f"http://127.0.0.1:{port}" for port in self.layout.gateways]
        every = json.dumps(gateway_urls)
        told = {"TEASPILL_NOTIFY_URLS": every, "TEASPILL_LIVE_URLS": every} if gateways else {}
        self.nodes = [ClusterNode(settings, self.layout, n) for n in self.layout.nodes]
        self.endpoints = [
            Endpoint(
                settings.model_copy(update={"endpoint_port": port}),
                app,
                {**extra, **told, **(endpoint_env or {})},
                log_name=f"endpoint-e{i + 1}",
            )
            for i, port in enumerate(self.layout.endpoints)
        ]
        for i, endpoint in enumerate(self.endpoints):
            endpoint.name = f"endpoint e{i + 1}"
        self.proxy = Proxy(settings, self.layout)
        port = self.layout.postgres
        self.postgres = Postgres(settings, port) if port is not None else None
        self.gateways = (
            [
                Gateway(
                    settings.model_copy(update={"gateway_port": port}),
                    env=extra,
                    log_name=f"gateway-g{i + 1}",
                )
                for i, port in enumerate(self.layout.gateways)
            ]
            if gateways
            else []
        )
        for i, gateway in enumerate(self.gateways):
            gateway.name = f"gateway g{i + 1}"
        self.deployment: dict[str, Any] = {}

    def parts(self) -> dict[str, Part]:
        """Every part by the name `teaspill status` and `down` use, in the order `down`
        stops them."""
        named: dict[str, Part] = {f"gateway-g{i + 1}": g for i, g in enumerate(self.gateways)}
        named |= {f"restate-{n.node.name}": n for n in self.nodes}
        named["haproxy"] = self.proxy
        named |= {f"endpoint-e{i + 1}": e for i, e in enumerate(self.endpoints)}
        if self.postgres is not None:
            named["postgres"] = self.postgres
        return named

    def up(self, progress: Callable[[str], None] = lambda _: None) -> Cluster:
        same_node_ports(self.settings, self.layout)
        try:
            find_haproxy()
            self._start_read_side(progress)
            s = self.settings
            names = ", ".join(n.name for n in self.layout.nodes)
            progress(f"Starting restate-server nodes {names} (one cluster, log kept on two)")
            for node in self.nodes:
                node.spawn()
            for node in self.nodes:
                node.wait_ready(120.0)
            progress(f"Starting {len(self.endpoints)} endpoint replicas behind HAProxy")
            for endpoint in self.endpoints:
                endpoint.spawn()
            for endpoint in self.endpoints:
                endpoint.wait_ready()
            progress(
                f"Starting HAProxy (ingress {s.ingress_url}, admin {s.admin_url}, "
                f"endpoint {s.endpoint_url})"
            )
            self.proxy.start()
            if (moved := restored(s)) is not None:
                progress("Pointing the restored deployments at this endpoint")
                repoint(s, moved)
            progress(f"Registering the endpoint once, at HAProxy's {s.endpoint_url}")
            self.deployment = register(s, timeout=120.0)
            if moved is not None:
                progress("Rebuilding the projection from the restored installation")
                rebuild_projection(s)
            for gateway in self.gateways:
                progress(f"Starting {gateway.name} on {gateway.url}")
                gateway.start()
        except BaseException:
            with contextlib.suppress(StackError):
                self.down()
            raise
        return self

    def _start_read_side(self, progress: Callable[[str], None]) -> None:
        """The home's PostgreSQL, and every part pointed at it (unless the settings name a
        PostgreSQL of their own, which the layout then starts nothing for)."""
        if self.postgres is not None:
            find_postgres()
            progress(f"Starting PostgreSQL on 127.0.0.1:{self.postgres.port} (the read side)")
            self.postgres.start()
            self._read_from(self.postgres.url)

    def _read_from(self, url: str) -> None:
        """Every replica and gateway (and these settings) on the PostgreSQL at `url`."""
        self.settings = self.settings.model_copy(update={"projection_url": url})
        for part in [*self.endpoints, *self.gateways]:
            part.settings = part.settings.model_copy(update={"projection_url": url})

    def down(self) -> None:
        """Stop every part in `parts` order; each is stopped even if one before fails to,
        and the first failure is raised."""
        failure: StackError | None = None
        for part in self.parts().values():
            try:
                part.stop()
            except StackError as error:
                failure = failure or error
        if failure is not None:
            raise failure

    def pids(self) -> dict[str, int | None]:
        return {name: part.pid for name, part in self.parts().items()}

    def __enter__(self) -> Cluster:
        return self.up()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()
