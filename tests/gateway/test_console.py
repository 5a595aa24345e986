"""The console's files: served by the gateway, self-contained (nothing from elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.gateway.console import FILES
from tests.gateway.conftest import World

pytestmark = pytest.mark.anyio


async def test_the_console_is_served_at_the_root(world: World) -> None:
    page = await world.client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for src in re.findall(r'(?:src|href)="(/console/[^"]+)"', page.text):
        asset = await world.client.get(src)
        assert asset.status_code == 200, src


async def test_an_unknown_file_is_a_404_sentence(world: World) -> None:
    for name in ("nope.js", "..%2Fapp.py", "console.py"):
        response = await world.client.get(f"/console/{name}")
        assert response.status_code == 404
        assert response.json()["error"]["message"]


@pytest.mark.parametrize("path", sorted(FILES.iterdir()), ids=lambda p: p.name)
def test_no_file_reaches_outside_the_gateway(path: Path) -> None:
    text = path.read_text()
    assert not re.search(r"https?://", text), "the console must work offline"
    assert "innerHTML" not in text, "text from agents must never become markup"
