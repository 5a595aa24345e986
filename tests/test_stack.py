"""The stack's parts: a real restate-server and endpoint (durable), and their error sentences."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.settings import Settings
from services.stack import (
    Endpoint,
    Gateway,
    RestateServer,
    Stack,
    StackError,
    find_restate_server,
    isolated_settings,
    process,
    register,
    settings_env,
)
from services.stack.process import free_port

COUNTER_APP = """
import restate

counter = restate.VirtualObject("Counter")


@counter.handler()
async def add(ctx: restate.ObjectContext, n: int) -> int:
    total = (await ctx.get("total") or 0) + n
    ctx.set("total", total)
    return total


app = restate.app([counter])
"""


def make_settings(home: Path) -> Settings:
    return isolated_settings(home)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "home")


@pytest.fixture
def server(settings: Settings) -> Iterator[RestateServer]:
    server = RestateServer(settings)
    yield server
    server.kill()


def admin_health(settings: Settings) -> int:
    return httpx.get(f"{settings.admin_url}/health", timeout=5.0).status_code


def add(settings: Settings, n: int) -> int:
    response = httpx.post(f"{settings.ingress_url}/Counter/tea/add", json=n, timeout=60.0)
    response.raise_for_status()
    total: int = response.json()
    return total


@pytest.mark.durable
@pytest.mark.timeout(120)
def test_restate_restarts_healthy_on_its_base_dir(
    settings: Settings, server: RestateServer
) -> None:
    server.start()
    assert admin_health(settings) == 200

    server.stop()
    assert not server.running
    with pytest.raises(httpx.TransportError):
        admin_health(settings)

    server.start()
    assert admin_health(settings) == 200
    assert (settings.home / "restate").is_dir()
    assert (settings.home / "logs" / "restate.log").stat().st_size > 0
    assert shared_with_others(settings.home) == []


def shared_with_others(home: Path) -> list[str]:
    """What under `home` (itself included) its group or others may read, write or enter."""
    paths = [home, *home.rglob("*")]
    return [str(p) for p in paths if not p.is_symlink() and p.stat().st_mode & 0o077]


def test_a_home_others_could_read_is_made_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    process.private_home(home)
    assert home.stat().st_mode & 0o777 == 0o700
    process.private_home(tmp_path / "new" / "home")
    assert (tmp_path / "new" / "home").stat().st_mode & 0o777 == 0o700


def test_every_server_has_a_keep_alive_and_the_endpoint_a_read_timeout(
    settings: Settings,
) -> None:
    endpoint = Endpoint(settings).argv()
    gateway = Gateway(settings).argv()
    assert endpoint[endpoint.index("--keep-alive") + 1] == str(settings.keep_alive_seconds)
    assert endpoint[endpoint.index("--read-timeout") + 1] == str(
        settings.endpoint_read_timeout_seconds
    )
    assert gateway[gateway.index("--keep-alive") + 1] == str(settings.keep_alive_seconds)
    assert "--read-timeout" not in gateway


@pytest.mark.durable
@pytest.mark.timeout(180)
def test_stack_keeps_object_state_across_kills(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "counter_app.py").write_text(COUNTER_APP)
    stack = Stack(settings, app="counter_app:app", env={"PYTHONPATH": str(tmp_path)})
    with stack:
        assert [s["name"] for s in stack.deployment["services"]] == ["Counter"]
        assert add(settings, 2) == 2

        stack.restate.kill()
        stack.restate.start()
        assert add(settings, 3) == 5

        stack.endpoint.kill()
        stack.endpoint.start()
        assert add(settings, 4) == 9
    assert not stack.restate.running
    assert not stack.endpoint.running


def test_start_names_the_port_that_is_taken(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", settings.admin_port))
        taken.listen()
        with pytest.raises(StackError, match=f"Port {settings.admin_port} \\(Restate admin\\)"):
            RestateServer(settings).start()


def ephemeral_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> range:
    """The kernel's ephemeral range as it is, before `free_port` is shown `text` instead."""
    first, last = (int(n) for n in process.EPHEMERAL_RANGE.read_text().split())
    (tmp_path / "range").write_text(text)
    monkeypatch.setattr(process, "EPHEMERAL_RANGE", tmp_path / "range")
    return range(first, last + 1)


def test_free_ports_are_free_and_never_handed_out_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fifty ports out of the 76 below a range starting at 1100: picked at random, some
    would repeat if the ports handed out were not remembered."""
    ephemeral_range(tmp_path, monkeypatch, "1100\t65535\n")
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports), "a port handed out twice"
    assert all(1024 <= port < 1100 for port in ports), ports
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("ephemeral", "expected"),
    [
        ("40000\t60999\n", range(30000, 40000)),  # more room below
        ("1100\t50000\n", range(50001, 60001)),  # more room above
        ("1024\t65535\n", None),  # no room: the kernel's choice, from its own range
    ],
)
def test_free_ports_are_outside_the_ephemeral_range_where_it_leaves_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ephemeral: str, expected: range | None
) -> None:
    """A port from the kernel's ephemeral range can be taken by an outgoing connection
    before the child binds it (restate-server then fails with "Address in use")."""
    kernels = ephemeral_range(tmp_path, monkeypatch, ephemeral)
    ports = [free_port() for _ in range(10)]
    assert all(port in (expected or kernels) for port in ports), ports
    assert len(set(ports)) == len(ports)


def test_a_bad_binary_override_is_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEASPILL_RESTATE_SERVER", "/nowhere/restate-server")
    with pytest.raises(StackError, match="is not an executable file"):
        find_restate_server()


def test_register_posts_the_endpoint_with_force(settings: Settings) -> None:
    seen: list[object] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        if len(seen) == 1:
            return httpx.Response(500, json={"message": "endpoint not up yet"})
        return httpx.Response(201, json={"id": "dp_1", "services": []})

    deployment = register(settings, transport=httpx.MockTransport(answer))
    assert deployment["id"] == "dp_1"
    assert seen == [{"uri": settings.endpoint_url, "force": True}] * 2


def test_register_fails_at_once_on_a_client_error(settings: Settings) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"message": "bad uri"})

    with pytest.raises(StackError, match=r"answered 400: .*bad uri"):
        register(settings, timeout=60.0, transport=httpx.MockTransport(answer))


def test_children_read_the_same_settings(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    custom = settings.model_copy(update={"tool_modules": ("a.tools", "b.tools")})
    for name, value in settings_env(custom).items():
        monkeypatch.setenv(name, value)
    assert Settings() == custom.model_copy(update={"home": custom.home.absolute()})
