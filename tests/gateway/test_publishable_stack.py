"""Publishable keys and end users on a real stack: a page's key, valid from its origins
only, reaching only the conversations of the end user its token names; every other
route refused with its status and sentence."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import jwt
import pytest

from schemas.events import ApprovalRequested, PageCallClaimed, TurnEnded, TurnStarted
from services.endusers import conversation_address
from services.executor.scripted import script
from tests.durable.conftest import eventually
from tests.gateway.test_stack import CALCULATE, GatewayStack, _events, gateway_stack

pytestmark = pytest.mark.durable

ORIGIN = "https://app.example.com"
ELSEWHERE = "https://evil.example.net"
NOW = time.time  # noqa: TID251 - a token's exp is wall-clock time
OTHER_SECRET = "another-secret-that-is-long-enough-000-0123456789-0123456789"  # noqa: S105
T = TypeVar("T")
SECRET = "a-secret-of-the-product-backend-0123456789-0123456789-0123456789"  # noqa: S105 - a test value


def token(user: str, aud: str, *, secret: str = SECRET, seconds: float = 300, **claims: Any) -> str:
    """What the product's backend signs for its signed-in user, for the publishable key
    whose id is `aud`."""
    body = {"sub": user, "aud": aud, "exp": int(NOW() + seconds), **claims}
    return jwt.encode(body, secret, algorithm="HS256")


def key_id(key: str) -> str:
    return key.split("_")[1]


@dataclass
class Page:
    gw: GatewayStack
    key: str

    @property
    def key_id(self) -> str:
        return key_id(self.key)

    def headers(self, user: str | None = None, origin: str = ORIGIN) -> dict[str, str]:
        found = {"Authorization": f"Bearer {self.key}", "Origin": origin}
        if user is not None:
            found["Teaspill-User"] = token(user, self.key_id)
        return found

    def get(self, path: str, user: str | None = "U", **given: Any) -> httpx.Response:
        return self.gw.http.get(path, headers={**self.headers(user), **given.pop("headers", {})})

    def post(self, path: str, user: str | None = "U", **given: Any) -> httpx.Response:
        headers = {**self.headers(user), **given.pop("headers", {})}
        return self.gw.http.post(path, headers=headers, **given)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    home = tmp_path_factory.mktemp("publishable-home")
    with gateway_stack(home, key_cache_seconds=0.5) as gw:
        registered = gw.http.put(
            "/v1/end-users", json={"algorithm": "HS256", "key": SECRET}, headers=gw.auth
        )
        assert registered.status_code == 200, registered.text
        made = gw.http.post(
            "/v1/keys",
            json={"scope": "publishable", "name": "web", "origins": [ORIGIN], "kinds": ["calc"]},
            headers=gw.auth,
        )
        assert made.status_code == 201, made.text
        assert made.json()["info"]["origins"] == [ORIGIN]
        found = Page(gw, made.json()["key"])
        eventually(lambda: found.get("/v1/me").status_code == 200 or None, 60, "the key to work")
        yield found


def address(user: str, kind: str = "calc") -> str:
    return conversation_address("acme", kind, user)


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    message: str = response.json()["error"]["message"]
    return message


def test_me_names_the_user_and_their_conversation(page: Page) -> None:
    me = page.get("/v1/me").json()
    assert me["scope"] == "publishable"
    assert me["user"] == "U"
    assert me["conversations"] == [{"kind": "calc", "address": address("U")}]
    assert address("U") != address("V")


def test_the_user_talks_to_their_conversation_and_it_carries_them(page: Page) -> None:
    sent = page.post(f"/v1/agents/{address('U')}/messages", json={"text": CALCULATE})
    assert sent.status_code == 202, sent.text

    def ended() -> list[Any] | None:
        response = page.get(f"/v1/agents/{address('U')}/timeline?limit=500")
        if response.status_code != 200:
            return None
        events = _events(response)
        return events if any(isinstance(e.body, TurnEnded) for e in events) else None

    events = eventually(ended, 120, "U's turn to end")
    started = [e.body for e in events if isinstance(e.body, TurnStarted)]
    assert [(s.user, s.spec_kind) for s in started] == [("U", "calc")]
    listed = page.get("/v1/me/conversations").json()
    assert listed["user"] == "U"
    assert [c["address"] for c in listed["conversations"]] == [address("U")]
    assert page.get("/v1/me/conversations", user="V").json()["conversations"] == []


def test_another_users_conversation_is_answered_like_one_that_does_not_exist(
    page: Page,
) -> None:
    eventually(
        lambda: page.get(f"/v1/agents/{address('U')}").status_code == 200 or None,
        60,
        "U's conversation to exist",
    )
    nowhere = "acme.no-such-agent"
    for path in ("", "/timeline", "/events"):
        theirs = error(page.get(f"/v1/agents/{address('U')}{path}", user="V"), 404)
        none = error(page.get(f"/v1/agents/{nowhere}{path}", user="V"), 404)
        assert theirs == none.replace(nowhere, address("U"))
    sent = page.post(f"/v1/agents/{address('U')}/messages", user="V", json={"text": "hi"})
    assert error(sent, 404).startswith(f"there is no agent {address('U')}")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/agents", None),
        ("POST", "/v1/specs", {"kind": "x", "instructions": "x", "model": "script"}),
        ("GET", "/v1/specs", None),
        ("GET", "/v1/keys", None),
        ("POST", "/v1/keys", {"scope": "admin"}),
        ("PUT", "/v1/end-users", {"anonymous": True}),
        ("POST", "/v1/agents/{U}/stop", {}),
        ("DELETE", "/v1/agents/{U}", None),
        ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ],
)
def test_a_publishable_key_cannot_list_publish_administer_or_make_keys(
    page: Page, method: str, path: str, body: Any
) -> None:
    path = path.replace("{U}", address("U"))
    response = page.gw.http.request(method, path, json=body, headers=page.headers("U"))
    assert error(response, 403) == (
        f"a publishable key cannot call {method} {path}: it may only send messages to, read "
        "and follow the conversations of the end user it is presented with"
    )


def test_a_kind_the_key_does_not_list_is_not_reached(page: Page) -> None:
    other = page.post(f"/v1/agents/{address('U')}/messages", json={"text": "x", "kind": "other"})
    assert "may name no other kind" in error(other, 403)
    unlisted = page.post(f"/v1/agents/{address('U', 'other')}/messages", json={"text": "x"})
    assert error(unlisted, 404).startswith(f"there is no agent {address('U', 'other')}")


def test_cors_is_answered_for_the_keys_origins_and_nothing_else(page: Page) -> None:
    ask = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    path = f"/v1/agents/{address('U')}/messages"

    # The gateway reads the origins publishable keys list at most once a second.
    def answered() -> httpx.Response | None:
        response = page.gw.http.options(path, headers={"Origin": ORIGIN, **ask})
        return response if response.status_code == 204 else None

    allowed = eventually(
        answered,
        30,
        "the key's origin to be answered",
    )
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "teaspill-user" in allowed.headers["access-control-allow-headers"]
    refused = page.gw.http.options(path, headers={"Origin": ELSEWHERE, **ask})
    assert "access-control-allow-origin" not in refused.headers
    read = page.get("/v1/me")
    assert read.headers["access-control-allow-origin"] == ORIGIN
    foreign = page.gw.http.get("/v1/me", headers=page.headers("U", origin=ELSEWHERE))
    assert "access-control-allow-origin" not in foreign.headers
    assert error(foreign, 403).startswith(
        f"publishable key {page.key.split('_')[1]} is not valid from origin {ELSEWHERE}"
    )
    tenant_wide = page.gw.http.get("/v1/me", headers={**page.gw.auth, "Origin": ORIGIN})
    assert tenant_wide.status_code == 200
    assert "access-control-allow-origin" not in tenant_wide.headers


def test_tokens_expired_forged_or_of_another_algorithm_are_401(page: Page) -> None:
    def with_token(value: str) -> httpx.Response:
        return page.get(
            f"/v1/agents/{address('U')}/timeline", user=None, headers={"Teaspill-User": value}
        )

    mine = page.key_id
    cases = {
        token("U", mine, seconds=-5): "the end-user token has expired",
        token("U", mine, secret=OTHER_SECRET): "has a signature the",
        jwt.encode({"sub": "U", "exp": int(NOW()) + 60}, SECRET, algorithm="HS512"): (
            "is not signed with HS256"
        ),
        jwt.encode({"sub": "U", "aud": mine}, SECRET, algorithm="HS256"): "has no exp claim",
        token("U", mine, seconds=25 * 3600): "lives 25 hours, more than the 24",
        "not-a-jwt": "is not a well-formed JWT",
    }
    for value, words in cases.items():
        response = with_token(value)
        assert words in error(response, 401), value
        assert response.headers["access-control-allow-origin"] == ORIGIN, "the page reads why"
    missing = page.get(f"/v1/agents/{address('U')}/timeline", user=None)
    assert error(missing, 401).startswith("this route needs an end-user token")


def test_visitors_get_a_conversation_of_their_own_only_when_the_tenant_takes_them(
    page: Page,
) -> None:
    refused = page.post("/v1/visitors", user=None)
    assert error(refused, 403).startswith("tenant acme takes no visitors")
    turned = page.gw.http.put(
        "/v1/end-users",
        json={"algorithm": "HS256", "key": SECRET, "anonymous": True},
        headers=page.gw.auth,
    )
    assert turned.json()["anonymous"] is True
    assert SECRET not in turned.text

    def visitor() -> dict[str, str] | None:
        response = page.post("/v1/visitors", user=None)
        return response.json() if response.status_code == 201 else None

    given = eventually(visitor, 30, "the tenant to take visitors")
    mine = {"Teaspill-User": given["token"]}
    me = page.get("/v1/me", user=None, headers=mine).json()
    assert me["user"] == given["user"]
    assert me["user"].startswith("visitor:")
    assert me["conversations"] == [{"kind": "calc", "address": address(given["user"])}]
    other = page.post("/v1/visitors", user=None).json()
    assert other["user"] != given["user"]
    tampered = given["token"][:-3] + ("AAA" if not given["token"].endswith("AAA") else "BBB")
    forged = page.get("/v1/me", user=None, headers={"Teaspill-User": tampered})
    assert "visitor token" in error(forged, 401)


def test_a_revoked_publishable_key_stops_and_its_origin_is_no_longer_answered(
    tmp_path: Path, page: Page
) -> None:
    made = page.gw.http.post(
        "/v1/keys",
        json={"scope": "publishable", "origins": ["http://localhost:9"], "kinds": ["calc"]},
        headers=page.gw.auth,
    ).json()
    ask = {"Origin": "http://localhost:9", "Access-Control-Request-Method": "GET"}
    eventually(
        lambda: page.gw.http.options("/v1/me", headers=ask).status_code == 204 or None,
        30,
        "the origin to be answered",
    )
    revoked = page.gw.http.post(f"/v1/keys/{made['info']['id']}/revoke", headers=page.gw.auth)
    assert revoked.status_code == 200
    eventually(
        lambda: page.gw.http.options("/v1/me", headers=ask).status_code == 403 or None,
        30,
        "the origin to be refused",
    )


def test_a_page_claims_and_answers_its_users_calls_and_no_one_elses(page: Page) -> None:
    gw = page.gw
    spec = {
        "kind": "pager",
        "instructions": "Follow the script.",
        "model": "script",
        "tools": {"page:read_title": "allow"},
    }
    assert gw.http.post("/v1/specs", json=spec, headers=gw.auth).status_code == 201
    made = gw.http.post(
        "/v1/keys",
        json={"scope": "publishable", "origins": [ORIGIN], "kinds": ["pager"]},
        headers=gw.auth,
    )
    pager = Page(gw, made.json()["key"])
    eventually(lambda: pager.get("/v1/me").status_code == 200 or None, 60, "the key to work")
    mine = address("U", "pager")
    title = {"name": "read_title", "description": "The page's title.", "parameters": {}}
    text = script({"calls": [{"name": "read_title", "arguments": {}}]}, {"reply": "{results}"})
    sent = pager.post(f"/v1/agents/{mine}/messages", json={"text": text, "page_tools": [title]})
    assert sent.status_code == 202, sent.text
    (asked,) = [
        e.body
        for e in eventually(lambda: _asked(pager, mine), 120, "the page call")
        if isinstance(e.body, ApprovalRequested)
    ]
    calls = f"/v1/agents/{mine}/page-calls/{asked.request_id}"
    theirs = pager.post(f"{calls}/claim", user="V", json={"page": "tab-1"})
    assert error(theirs, 404).startswith(f"there is no agent {mine}")
    claimed = pager.post(f"{calls}/claim", json={"page": "tab-1"})
    assert claimed.status_code == 200, claimed.text
    assert claimed.headers["access-control-allow-origin"] == ORIGIN
    eventually(lambda: _seen(pager, mine, PageCallClaimed), 60, "the claim")
    forged = pager.post(f"{calls}/result", user="V", json={"page": "tab-1", "content": "V's"})
    assert error(forged, 404).startswith(f"there is no agent {mine}")
    posted = pager.post(f"{calls}/result", json={"page": "tab-1", "content": "My page"})
    assert posted.status_code == 202, posted.text
    done = eventually(lambda: _seen(pager, mine, TurnEnded), 120, "the turn to end")
    assert done.reply == "My page"


def _asked(page: Page, at: str) -> list[Any] | None:
    response = page.get(f"/v1/agents/{at}/timeline?limit=500")
    if response.status_code != 200:
        return None
    events = _events(response)
    return events if any(isinstance(e.body, ApprovalRequested) for e in events) else None


def _seen(page: Page, at: str, kind: type[T]) -> T | None:
    response = page.get(f"/v1/agents/{at}/timeline?limit=500")
    found = [e.body for e in _events(response) if isinstance(e.body, kind)]
    return found[-1] if found else None


def test_a_token_made_for_one_publishable_key_is_refused_with_another(page: Page) -> None:
    made = page.gw.http.post(
        "/v1/keys",
        json={"scope": "publishable", "origins": [ORIGIN], "kinds": ["calc"]},
        headers=page.gw.auth,
    )
    other = Page(page.gw, made.json()["key"])
    eventually(lambda: other.get("/v1/me").status_code == 200 or None, 60, "the key to work")
    theirs = {"Teaspill-User": token("U", page.key_id)}
    refused = other.get("/v1/me/conversations", user=None, headers=theirs)
    assert error(refused, 401) == (
        f"the end-user token is not for publishable key {other.key_id}: its aud must name "
        "the key's id (a token is signed for one key)"
    )
    assert page.get("/v1/me/conversations", user=None, headers=theirs).status_code == 200


def test_the_users_page_runs_its_conversation_over_ag_ui_and_no_one_elses(page: Page) -> None:
    def run(thread: str, user: str) -> httpx.Response:
        body = {"threadId": thread, "runId": f"run-{user}", "state": {}, "tools": [],
                "context": [], "forwardedProps": {"kind": "calc"},
                "messages": [{"id": "m1", "role": "user", "content": CALCULATE}]}  # fmt: skip
        return page.post("/v1/agui", user=user, json=body)

    theirs = run(address("AG"), "AG")
    assert theirs.status_code == 200, theirs.text
    frames = [line for line in theirs.text.splitlines() if line.startswith("data: ")]
    assert '"type":"RUN_STARTED"' in frames[0]
    assert '"type":"RUN_FINISHED"' in frames[-1]
    assert '"result":"It is 42"' in frames[-1]
    refused = run(address("AG"), "BG")
    assert error(refused, 404).startswith(f"there is no agent {address('AG')}")
    elsewhere = run("acme.someone-else", "AG")
    assert error(elsewhere, 404).startswith("there is no agent acme.someone-else")
