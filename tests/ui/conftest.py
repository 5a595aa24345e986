"""A real stack for the UI tests (the console in a browser, AG-UI, the Python client):
restate-server, the endpoint (with the real bundled model, pushing live text to the
gateway) and the gateway, each a child process on free ports."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.client import Client
from services.contracts import ADD_KEY
from services.ingress import Ingress
from services.keys import new_key
from services.settings import Settings
from services.stack import Gateway, Stack, isolated_settings
from tests.durable.conftest import eventually

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = "CONSOLE_SCREENSHOTS"
"""The variable naming where the browser tests write their screenshots; unset, they go to a
temporary directory (docs/development.md says how to refresh docs/console/)."""
LIVE_TOKEN = "console-live-token"  # noqa: S105 - a test value
SPECS: list[dict[str, Any]] = [
    {"kind": "calc", "instructions": "Use the calculator.", "model": "script",
     "tools": {"calculator": "ask"}},
    {"kind": "script", "instructions": "Follow the script.", "model": "script",
     "tools": ["calculator"]},
    {"kind": "chat", "instructions": "Answer in two or three sentences.", "model": "smollm2",
     "limits": {"max_tokens": 48}},
    {"kind": "asker", "instructions": "Follow the script.", "model": "script",
     "tools": {"ask_user": "allow"}},
    {"kind": "pager", "instructions": "Follow the script.", "model": "script",
     "tools": {"page:read_title": "allow"}},
    {"kind": "reader", "instructions": "Follow the script.", "model": "script",
     "tools": ["search_memory", "search_docs"]},
]  # fmt: skip


@dataclass
class UiStack:
    settings: Settings
    gateway: Gateway
    keys: dict[str, str]

    @property
    def url(self) -> str:
        return self.gateway.url

    def client(self, scope: str = "admin") -> Client:
        return Client(self.url, self.keys[scope])


def make_key(settings: Settings, http: httpx.Client, scope: str) -> str:
    plaintext, key = new_key("acme", scope, datetime.now(UTC))  # type: ignore[arg-type]  # noqa: TID251
    ingress = Ingress(settings.ingress_url, timeout=30)
    try:
        ingress.call(ADD_KEY, key, "acme")
    finally:
        ingress.close()
    auth = {"Authorization": f"Bearer {plaintext}"}
    eventually(
        lambda: http.get("/v1/me", headers=auth).status_code == 200 or None,
        60,
        "the key to reach the projection",
    )
    return plaintext


@pytest.fixture(scope="session")
def ui_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiStack]:
    settings = isolated_settings(
        tmp_path_factory.mktemp("ui-home"),
        live_token=LIVE_TOKEN,
        tool_modules=("tests.fixtures.tools",),
        model_context=2048,
    )
    with Stack(settings) as stack:
        with httpx.Client(base_url=stack.gateway.url, timeout=30) as http:
            keys = {scope: make_key(settings, http, scope) for scope in ("read", "write", "admin")}
            for spec in SPECS:
                answer = http.post(
                    "/v1/specs", json=spec, headers={"Authorization": f"Bearer {keys['admin']}"}
                )
                assert answer.status_code == 201, answer.text
        yield UiStack(settings, stack.gateway, keys)
