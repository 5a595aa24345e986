"""When the client sends a request again: after no answer or a 503, for up to
`retry_for` seconds, and only when that cannot do anything twice (a read, a send with its
idempotency key, a request that never left); never after an answer retrying cannot
change."""

from __future__ import annotations

import httpx
import pytest

from services.client import ApiError, AsyncClient, Client

ACCEPTED = {"address": "acme.a", "after_seq": 3, "events_url": "/v1/agents/acme.a/events"}
ROW = {
    "address": "acme.a",
    "kind": "helper",
    "spec_version": 1,
    "status": "idle",
    "turn": 1,
    "last_seq": 3,
    "last_outcome": "succeeded",
    "last_activity": "2026-12-01T00:00:00Z",
}
UNAVAILABLE = {"error": {"status": 503, "message": "Restate ingress cannot be reached"}}


class Gateway:
    """A gateway that fails the first `failures` requests (503, or `raises`), then answers
    with `ok`; it keeps every request."""

    def __init__(
        self,
        failures: int,
        ok: tuple[int, dict[str, object]] = (202, ACCEPTED),
        raises: type[httpx.TransportError] | None = None,
    ) -> None:
        self.failures = failures
        self.ok = ok
        self.raises = raises
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if len(self.requests) <= self.failures:
            if self.raises is not None:
                raise self.raises("cut", request=request)
            return httpx.Response(503, json=UNAVAILABLE)
        return httpx.Response(self.ok[0], json=self.ok[1])


def sync(gateway: Gateway, retry_for: float = 10.0) -> Client:
    return Client("http://g", "k", retry_for=retry_for, transport=httpx.MockTransport(gateway))


def test_a_send_is_sent_again_after_503s_with_one_idempotency_key() -> None:
    gateway = Gateway(failures=2)
    with sync(gateway) as client:
        accepted = client.send("acme.a", "hello")
    assert accepted.after_seq == 3
    keys = {r.headers["idempotency-key"] for r in gateway.requests}
    assert len(gateway.requests) == 3
    assert len(keys) == 1, "every try is the same send"
    assert keys.pop().startswith("client-")

    given = Gateway(failures=1)
    with sync(given) as client:
        client.send("acme.a", "hello", idempotency_key="order-7")
    assert [r.headers["idempotency-key"] for r in given.requests] == ["order-7"] * 2


def test_two_sends_carry_two_keys() -> None:
    gateway = Gateway(failures=0)
    with sync(gateway) as client:
        client.send("acme.a", "one")
        client.send("acme.a", "two")
    assert len({r.headers["idempotency-key"] for r in gateway.requests}) == 2


def test_a_read_is_asked_again_after_the_answer_was_lost() -> None:
    gateway = Gateway(failures=2, ok=(200, ROW), raises=httpx.ReadError)
    with sync(gateway) as client:
        assert client.agent("acme.a").last_seq == 3
    assert len(gateway.requests) == 3


def test_a_request_without_a_key_is_sent_again_only_if_it_never_left() -> None:
    refused = Gateway(failures=1)
    with sync(refused) as client, pytest.raises(ApiError) as error:
        client.stop("acme.a")
    assert (error.value.status, len(refused.requests)) == (503, 1), "a stop is sent once"

    lost = Gateway(failures=1, raises=httpx.ReadError)
    with sync(lost) as client, pytest.raises(ApiError) as error:
        client.publish({"kind": "calc", "instructions": "Use the calculator."})
    assert (error.value.status, len(lost.requests)) == (0, 1), "it may have arrived"

    unsent = Gateway(
        failures=2, ok=(202, ACCEPTED | {"message": "held"}), raises=httpx.ConnectError
    )
    with sync(unsent) as client:
        assert client.stop("acme.a").after_seq == 3
    assert len(unsent.requests) == 3, "no connection was made: nothing arrived"


def test_an_answer_retrying_cannot_change_is_raised_at_once() -> None:
    busy = Gateway(failures=0, ok=(409, {"error": {"status": 409, "message": "acme.a is busy"}}))
    with sync(busy) as client, pytest.raises(ApiError) as error:
        client.send("acme.a", "hello", while_busy="reject")
    assert (error.value.status, str(error.value), len(busy.requests)) == (409, "acme.a is busy", 1)


def test_the_last_503_is_raised_once_retry_for_has_passed() -> None:
    down = Gateway(failures=10**6)
    with sync(down, retry_for=0.5) as client, pytest.raises(ApiError) as error:
        client.send("acme.a", "hello")
    assert error.value.status == 503
    assert str(error.value) == "Restate ingress cannot be reached"
    assert 2 <= len(down.requests) < 10
    once = Gateway(failures=10**6)
    with sync(once, retry_for=0) as client, pytest.raises(ApiError):
        client.agent("acme.a")
    assert len(once.requests) == 1, "retry_for=0 sends once"


@pytest.mark.anyio
async def test_the_async_client_sends_again_as_the_blocking_one() -> None:
    sends, stops = Gateway(failures=2), Gateway(failures=1)
    async with AsyncClient("http://g", "k", transport=httpx.MockTransport(sends)) as client:
        assert (await client.send("acme.a", "hello")).after_seq == 3
    async with AsyncClient("http://g", "k", transport=httpx.MockTransport(stops)) as client:
        with pytest.raises(ApiError) as error:
            await client.stop("acme.a")
    assert len(sends.requests) == 3
    assert len({r.headers["idempotency-key"] for r in sends.requests}) == 1
    assert (error.value.status, len(stops.requests)) == (503, 1)
