"""Visitors' limits on a real stack: a publishable key is given at most
`TEASPILL_VISITOR_RATE` visitor tokens a second (bursts of `TEASPILL_VISITOR_BURST`), and
its visitors create at most `TEASPILL_VISITOR_CONVERSATIONS` conversations a day; past
either, 429 with `Retry-After` and a sentence. End users with a token are not counted."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.durable.conftest import eventually
from tests.gateway.test_publishable_stack import ORIGIN, SECRET, Page, address, error, token
from tests.gateway.test_stack import CALCULATE, gateway_stack

pytestmark = pytest.mark.durable


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    home = tmp_path_factory.mktemp("visitors-home")
    limits = {"visitor_rate": 0.001, "visitor_burst": 3, "visitor_conversations": 1}
    with gateway_stack(home, key_cache_seconds=0.5, **limits) as gw:
        registered = gw.http.put(
            "/v1/end-users",
            json={"algorithm": "HS256", "key": SECRET, "anonymous": True},
            headers=gw.auth,
        )
        assert registered.status_code == 200, registered.text
        made = gw.http.post(
            "/v1/keys",
            json={"scope": "publishable", "origins": [ORIGIN], "kinds": ["calc"]},
            headers=gw.auth,
        )
        assert made.status_code == 201, made.text
        found = Page(gw, made.json()["key"])
        eventually(lambda: found.get("/v1/me").status_code == 200 or None, 60, "the key to work")
        yield found


def test_visitor_tokens_and_visitors_conversations_are_limited_per_key(page: Page) -> None:
    def visitor() -> dict[str, str] | None:
        response = page.post("/v1/visitors", user=None)
        return response.json() if response.status_code == 201 else None

    first = eventually(visitor, 30, "the tenant to take visitors")
    second = page.post("/v1/visitors", user=None).json()
    assert page.post("/v1/visitors", user=None).status_code == 201
    refused = page.post("/v1/visitors", user=None)
    assert error(refused, 429) == (
        f"publishable key {page.key_id} sent more than 0.001 requests for visitor tokens a "
        "second (bursts of 3); retry in 1000 s"
    )
    assert refused.headers["retry-after"] == "1000"
    assert refused.headers["access-control-allow-origin"] == ORIGIN

    def say(who: str, user: str) -> httpx.Response:
        path = f"/v1/agents/{address(user)}/messages"
        mine = {"Teaspill-User": who}
        return page.post(path, user=None, headers=mine, json={"text": CALCULATE})

    assert say(first["token"], first["user"]).status_code == 202
    assert say(first["token"], first["user"]).status_code == 202, "not a new conversation"
    over = say(second["token"], second["user"])
    message = error(over, 429)
    assert message.startswith(
        f"publishable key {page.key_id} let visitors create 1 conversations on "
    )
    assert message.endswith(
        "(UTC), the most for a day (TEASPILL_VISITOR_CONVERSATIONS): visitors' new "
        "conversations are taken again tomorrow; end users with a token are not counted"
    )
    assert int(over.headers["retry-after"]) >= 1
    assert say(token("U", page.key_id), "U").status_code == 202
