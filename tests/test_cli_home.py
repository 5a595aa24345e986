"""A stack's addresses live in its home: a shell that shares only the home finds them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from services.cli import home
from services.cli.main import main
from services.settings import load_settings
from services.stack import isolated_settings

PORTS = ("TEASPILL_GATEWAY_PORT", "TEASPILL_INGRESS_PORT", "TEASPILL_ADMIN_PORT")


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A home whose stack listens on other ports than the defaults, and a shell that sets
    only the home."""
    started = isolated_settings(tmp_path / "home")
    home.write(started, {"gateway": None})
    for name in PORTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEASPILL_HOME", str(started.home))
    return {
        "gateway": started.gateway_port,
        "ingress": started.ingress_port,
        "admin": started.admin_port,
    }


def test_the_record_is_the_users_alone(recorded: dict[str, int], tmp_path: Path) -> None:
    mode = stat.S_IMODE((tmp_path / "home" / "stack.json").stat().st_mode)
    assert mode == 0o600


def test_a_shell_with_only_the_home_reaches_the_recorded_ports(recorded: dict[str, int]) -> None:
    settings = home.located(load_settings())
    assert settings.gateway_port == recorded["gateway"]
    assert settings.ingress_url.endswith(f":{recorded['ingress']}")
    assert settings.admin_url.endswith(f":{recorded['admin']}")


def test_a_variable_that_is_set_still_wins(
    recorded: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEASPILL_GATEWAY_PORT", "8123")
    settings = home.located(load_settings())
    assert settings.gateway_port == 8123
    assert settings.ingress_port == recorded["ingress"]


def test_env_prints_lines_a_shell_can_eval(
    recorded: dict[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["env"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# No stack of ")  # the record names no live process
    assert out[1:] == [
        f"export TEASPILL_HOME={(tmp_path / 'home').resolve()}",
        f"export TEASPILL_GATEWAY_URL=http://127.0.0.1:{recorded['gateway']}",
        f"export TEASPILL_INGRESS_URL=http://127.0.0.1:{recorded['ingress']}",
        f"export TEASPILL_ADMIN_URL=http://127.0.0.1:{recorded['admin']}",
    ]
