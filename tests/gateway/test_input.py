"""Bad input on every route gets a clear 4xx with a sentence, never a 5xx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.gateway.conftest import LIVE_TOKEN, MAX_BODY, World

pytestmark = pytest.mark.anyio

POSTS = ["/v1/agents/acme.alpha/messages", "/v1/specs", "/internal/live"]
LIVE = {"X-Teaspill-Live-Token": LIVE_TOKEN}


def headers(world: World, path: str) -> dict[str, str]:
    return LIVE if path.startswith("/internal") else world.auth("admin")


def error_of(response_json: dict[str, Any]) -> tuple[int, str]:
    return response_json["error"]["status"], response_json["error"]["message"]


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("body", [b"{", b'{"text": "x",}', b"not json", b"\xff\xfe"])
async def test_malformed_json_is_400(world: World, path: str, body: bytes) -> None:
    response = await world.client.post(
        path, content=body, headers={**headers(world, path), "content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    status, message = error_of(response.json())
    assert status == 400
    assert "not valid JSON" in message


@pytest.mark.parametrize("path", POSTS)
async def test_an_oversized_body_is_413_by_its_length(world: World, path: str) -> None:
    body = b'{"text": "' + b"x" * MAX_BODY + b'"}'
    response = await world.client.post(path, content=body, headers=headers(world, path))
    assert response.status_code == 413
    assert f"{MAX_BODY} bytes" in error_of(response.json())[1]


@pytest.mark.parametrize("path", POSTS)
async def test_an_oversized_body_sent_in_chunks_is_413_as_it_is_counted(
    world: World, path: str
) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: only counting sees it
        for _ in range(10):
            yield b"x" * (MAX_BODY // 4)

    response = await world.streams.post(path, content=chunks(), headers=headers(world, path))
    assert response.status_code == 413
    await response.aclose()


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({}, "text", "Field required"),
        ({"text": ""}, "text", "at least 1 character"),
        ({"text": "x" * 32769}, "text", "at most 32768"),
        ({"text": 5}, "text", "valid string"),
        ({"text": "hi", "kind": "no spaces"}, "kind", "should match pattern"),
        ({"text": "hi", "extra": 1}, "extra", "Extra inputs"),
        ([], "", "JSON object"),
    ],
)
async def test_wrong_fields_of_a_message_name_the_field(
    world: World, body: object, field: str, says: str
) -> None:
    response = await world.client.post(
        "/v1/agents/acme.alpha/messages", json=body, headers=world.auth("write")
    )
    expected = 413 if body == {"text": "x" * 32769} else 422
    assert response.status_code == expected, response.text
    if expected == 422:
        message = error_of(response.json())[1]
        assert field in message
        assert says in message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"instructions": "x"}, "missing required field `kind`"),
        ({"kind": "a b", "instructions": "x"}, "field 'kind'"),
        ({"kind": "k", "instructions": "x", "tools": "calculator"}, "field 'tools': Expected"),
        ({"kind": "k", "instructions": "x", "tools": {"calculator": "maybe"}}, "ask or deny"),
        ({"kind": "k", "instructions": "x", "limits": {"max_rounds": -1}}, "limits.max_rounds"),
        (
            {"kind": "k", "instructions": "x", "limits": {"max_rounds": 99999999999999999999999}},
            "field 'limits.max_rounds' is 99999999999999999999999; it must be a whole number "
            "from 1 to 100",
        ),
        ({"kind": "k", "instructions": "x", "limits": {"max_rounds": 0}}, "from 1 to 100"),
        ({"kind": "k", "instructions": "x", "limits": {"max_rounds": True}}, "is True"),
        ({"kind": "k", "instructions": "x", "limits": {"max_round": 1}}, "'limits.max_rounds'?"),
        ({"kind": "k", "instructions": "x", "instruction": "y"}, "unknown field 'instruction'"),
        ({"kind": "k", "instructions": "x", "modle": "y"}, "Did you mean 'model'?"),
        ({"kind": "k", "instructions": "x", "version": 3}, "field 'version' (3) cannot be set"),
        ({"kind": "k", "instructions": "x", "can_spawn": "yes"}, "Expected `bool`, got `str`"),
        ({"kind": "k", "instructions": 5}, "field 'instructions': Expected `str`, got `int`"),
        ([], "a spec must be an object"),
    ],
)
async def test_wrong_fields_of_a_spec_name_the_field(world: World, body: object, says: str) -> None:
    response = await world.client.post("/v1/specs", json=body, headers=world.auth("admin"))
    assert response.status_code == 422
    assert says in error_of(response.json())[1]


@pytest.mark.parametrize(
    "query",
    [
        "after=-1",
        "after=abc",
        "after=1.5",
        "after=99999999999999999999999",
        "limit=0",
        "limit=501",
    ],
)
@pytest.mark.parametrize("route", ["timeline", "events"])
async def test_a_bad_seq_or_limit_is_422_naming_it(world: World, query: str, route: str) -> None:
    if route == "events" and query.startswith("limit"):
        return
    response = await world.client.get(
        f"/v1/agents/acme.alpha/{route}?{query}", headers=world.auth("read")
    )
    assert response.status_code == 422, response.text
    assert f"query parameter '{query.split('=', maxsplit=1)[0]}'" in error_of(response.json())[1]


@pytest.mark.parametrize(
    "value", ["-1", "x", "1.0", "", "99999999999999999999", str(2**70), "9" * 5000]
)
async def test_a_bad_last_event_id_is_400(world: World, value: str) -> None:
    response = await world.client.get(
        "/v1/agents/acme.alpha/events",
        headers={**world.auth("read"), "Last-Event-ID": value},
    )
    assert response.status_code == 400, response.text
    assert "Last-Event-ID" in error_of(response.json())[1]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("status=busy", "status"),
        ("kind=a%20b", "kind"),
    ],
)
async def test_bad_list_filters_are_422(world: World, query: str, says: str) -> None:
    response = await world.client.get(f"/v1/agents?{query}", headers=world.auth("read"))
    assert response.status_code == 422
    assert says in error_of(response.json())[1]


@pytest.mark.parametrize(
    "address", ["acme", "acme.", "ACME.x", "acme.x y", "acme..x", "a" * 201, "acme.x%0A"]
)
@pytest.mark.parametrize("route", ["", "/timeline", "/events"])
async def test_a_malformed_address_is_a_4xx_sentence(
    world: World, address: str, route: str
) -> None:
    response = await world.client.get(f"/v1/agents/{address}{route}", headers=world.auth("read"))
    assert response.status_code in (400, 404, 422), response.text
    assert error_of(response.json())[1]


async def test_an_unknown_agent_without_a_kind_is_404(world: World) -> None:
    response = await world.client.post(
        "/v1/agents/acme.newcomer/messages", json={"text": "hi"}, headers=world.auth("write")
    )
    assert response.status_code == 404
    assert error_of(response.json())[1] == (
        "there is no agent acme.newcomer yet: its first message creates it and must name a "
        "published kind in 'kind' (GET /v1/deployment lists them)"
    )


@pytest.mark.parametrize("address", ["acme.newcomer", "acme.alpha"])
async def test_an_unpublished_kind_is_404(world: World, address: str) -> None:
    response = await world.client.post(
        f"/v1/agents/{address}/messages",
        json={"text": "hi", "kind": "nosuch"},
        headers=world.auth("write"),
    )
    assert response.status_code == 404
    assert "no spec of kind 'nosuch' is published for tenant acme" in error_of(response.json())[1]
    assert world.ingress.sent == []


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"deltas": [{"agent": "acme.alpha"}]}, 422),
        ({"deltas": "x"}, 422),
        (
            {
                "deltas": [
                    {
                        "agent": "nope",
                        "turn": 1,
                        "round": 1,
                        "attempt": "a",
                        "offset": 0,
                        "text": "",
                    }
                ]
            },
            422,
        ),
        (
            {
                "deltas": [
                    {
                        "agent": "acme.a",
                        "turn": 1,
                        "round": 1,
                        "attempt": "a",
                        "offset": -1,
                        "text": "",
                    }
                ]
            },
            422,
        ),
        (
            {
                "deltas": [
                    {
                        "agent": "acme.a",
                        "turn": 2**70,
                        "round": 1,
                        "attempt": "a",
                        "offset": 0,
                        "text": "",
                    }
                ]
            },
            422,
        ),
        (
            {
                "deltas": [
                    {
                        "agent": "acme.a",
                        "turn": 1,
                        "round": True,
                        "attempt": "a",
                        "offset": 0,
                        "text": "",
                    }
                ]
            },
            422,
        ),
    ],
)
async def test_a_bad_live_batch_is_4xx(world: World, body: object, status: int) -> None:
    response = await world.client.post("/internal/live", json=body, headers=LIVE)
    assert response.status_code == status, response.text


@pytest.mark.parametrize("token", [None, "wrong", LIVE_TOKEN + "x"])
async def test_live_needs_the_token(world: World, token: str | None) -> None:
    headers = {"X-Teaspill-Live-Token": token} if token else {}
    response = await world.client.post("/internal/live", json={"deltas": []}, headers=headers)
    assert response.status_code == 401


async def test_unknown_routes_and_methods_answer_in_the_error_format(world: World) -> None:
    missing = await world.client.get("/nowhere")
    assert missing.status_code == 404
    assert error_of(missing.json())[0] == 404
    wrong = await world.client.delete("/v1/specs", headers=world.auth("admin"))
    assert wrong.status_code == 405
    assert "DELETE is not allowed" in error_of(wrong.json())[1]


@pytest.mark.parametrize("address", ["acme.newcomer%0A", "acme.alpha%0A"])
async def test_an_address_with_a_trailing_newline_is_400(world: World, address: str) -> None:
    """A newline is no character of an address, at the end either: refused before the
    address reaches a URL of Restate's ingress."""
    response = await world.client.post(
        f"/v1/agents/{address}/messages",
        json={"text": "hi", "kind": "helper"},
        headers=world.auth("write"),
    )
    assert response.status_code == 400, response.text
    assert "has an invalid part" in error_of(response.json())[1]
    assert world.ingress.sent == []
