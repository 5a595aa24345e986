"""Reading an object's stored value through Restate's admin SQL: what the SDK wrote is
what comes back, a key with a quote stays one literal, and every failure is one error."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import msgspec
import pytest
import restate

from schemas.tenant import Keys
from services.contracts import TENANT_KEYS
from services.gateway.stored import StateUnreadableError, StoredState
from services.keys import new_key

pytestmark = pytest.mark.anyio

KEYS = Keys((new_key("acme", "read", datetime(2026, 12, 1, tzinfo=UTC))[1],))


def answering(response: httpx.Response, asked: list[str] | None = None) -> StoredState:
    def handle(request: httpx.Request) -> httpx.Response:
        if asked is not None:
            asked.append(msgspec.json.decode(request.content)["query"])
        return response

    return StoredState("http://admin", httpx.MockTransport(handle))


async def test_the_value_the_sdk_stored_is_read_back() -> None:
    stored = restate.serde.DefaultSerde(Keys).serialize(KEYS)
    state = answering(httpx.Response(200, json={"rows": [{"value": stored.hex()}]}))
    assert await state.read(TENANT_KEYS, "acme") == KEYS
    await state.close()


async def test_an_object_without_the_value_reads_none_and_its_key_is_one_literal() -> None:
    asked: list[str] = []
    state = answering(httpx.Response(200, json={"rows": []}), asked)
    assert await state.read(TENANT_KEYS, "x' OR '1'='1") is None
    assert asked == [
        "SELECT value FROM state WHERE service_name = 'Tenant'"
        " AND service_key = 'x'' OR ''1''=''1' AND key = 'keys'"
    ]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (httpx.Response(500, text="boom"), "it answered 500"),
        (httpx.Response(200, json={"rows": [{"value": "zz"}]}), "not a stored value"),
        (httpx.Response(200, text="<html>"), "not a stored value"),
    ],
)
async def test_an_answer_that_is_not_a_stored_value_is_one_error(
    answer: httpx.Response, reason: str
) -> None:
    with pytest.raises(StateUnreadableError, match=reason):
        await answering(answer).read(TENANT_KEYS, "acme")


async def test_an_admin_api_that_does_not_answer_is_one_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    state = StoredState("http://admin", httpx.MockTransport(refuse))
    with pytest.raises(StateUnreadableError, match="not reachable"):
        await state.read(TENANT_KEYS, "acme")


@pytest.mark.parametrize(
    "key", ["acme\\", "x\\' OR 1=1 --", "acme\n"], ids=["backslash", "escape", "newline"]
)
async def test_a_name_restates_sql_would_read_as_an_escape_is_refused_unasked(key: str) -> None:
    asked: list[str] = []
    state = answering(httpx.Response(200, json={"rows": []}), asked)
    with pytest.raises(StateUnreadableError, match="holds characters no stored name has"):
        await state.read(TENANT_KEYS, key)
    assert asked == []
