"""What the gateway says when Restate cannot be reached: a sentence for the caller, never
the HTTP library's exception class or text."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from services.gateway.upstream import IngressUnavailableError, Upstream


def failing(error: type[httpx.TransportError]) -> Upstream:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error("low-level detail", request=request)

    return Upstream("http://restate.invalid", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (httpx.ReadTimeout, "did not answer in time, as when the service endpoint is down"),
        (httpx.ConnectError, "nothing answers at its address"),
        (httpx.RemoteProtocolError, "the connection to it failed"),
    ],
    ids=["timeout", "refused", "broken"],
)
def test_a_failed_exchange_is_a_503_sentence_without_the_librarys_words(
    error: type[httpx.TransportError], said: str
) -> None:
    upstream = failing(error)

    async def revoke() -> None:
        try:
            await upstream.revoke_key("acme", "k1")
        finally:
            await upstream.close()

    with pytest.raises(IngressUnavailableError) as raised:
        asyncio.run(revoke())
    assert raised.value.status == 503
    assert said in raised.value.message
    assert error.__name__ not in raised.value.message
    assert "low-level detail" not in raised.value.message


def test_the_health_check_says_why_in_words() -> None:
    upstream = failing(httpx.ConnectError)

    async def health() -> str:
        try:
            return await upstream.healthy()
        finally:
            await upstream.close()

    said = asyncio.run(health())
    assert said == "not reachable at http://restate.invalid (nothing answers at its address)"
