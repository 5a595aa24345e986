"""Values virtual objects keep, read straight from restate-server's storage through its
admin SQL (`POST /query` over the `state` table).

No handler runs for such a read, so it is answered while the service endpoint is down or
restarting; what it returns is what the object last stored, the same record its own
handlers read. The admin API must stay private to the stack (`docs/operations.md`); the
gateway is part of the stack and reads only the values `services.contracts` declares.
"""

from __future__ import annotations

from typing import TypeVar

import httpx
import msgspec

from services.contracts import Stored

T = TypeVar("T")
QUICK = 5.0
"""Seconds to wait for the admin API's answer."""


class StateUnreadableError(Exception):
    """Restate's admin API did not answer, or answered what is not a stored value."""


class _Row(msgspec.Struct):
    value: str
    """The stored bytes, hex-encoded."""


class _Rows(msgspec.Struct):
    rows: list[_Row]


class StoredState:
    """The HTTP client is made on first use, on the event loop that serves requests."""

    def __init__(self, admin_url: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = admin_url
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def read(self, stored: Stored[T], key: str) -> T | None:
        """The value `stored` names in the object keyed `key`; None when it holds none."""
        sql = (
            "SELECT value FROM state"  # noqa: S608 - every value is quoted by `_literal`
            f" WHERE service_name = {_literal(stored.service)}"
            f" AND service_key = {_literal(key)} AND key = {_literal(stored.name)}"
        )
        try:
            answer = await self._http().post(
                "/query", json={"query": sql}, headers={"accept": "application/json"}
            )
        except httpx.HTTPError as error:
            raise StateUnreadableError("not reachable") from error
        if not answer.is_success:
            raise StateUnreadableError(f"it answered {answer.status_code}")
        try:
            rows = msgspec.json.decode(answer.content, type=_Rows).rows
            return stored.decode(bytes.fromhex(rows[0].value)) if rows else None
        except (msgspec.DecodeError, ValueError) as error:
            raise StateUnreadableError("it answered what is not a stored value") from error

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.url, transport=self._transport, timeout=QUICK
            )
        return self._client


def _literal(text: str) -> str:
    """`text` as an SQL string literal. Restate's SQL reads a backslash as an escape, so a
    name holding one (or a control character) is refused rather than quoted: no service,
    key or state name has one."""
    if "\\" in text or not text.isprintable():
        raise StateUnreadableError(f"the name {text!r} holds characters no stored name has")
    return "'" + text.replace("'", "''") + "'"
