"""Telling gateways that agents' timelines grew, off the projector's write path.

Each gateway has its own queue and sender task: the writer only merges agents' newest
seqs into every queue (no I/O, no await), and a sender posts what piled up while its
previous post was in flight, in one request. A slow or unreachable gateway delays only
its own notices, and only by `timeout`; it never fails or slows a write. A gateway that
does not answer is tried again `RETRY_AFTER` seconds later, with what it missed and
what piled up meanwhile. A notice is a hint (the gateway reads the events from the
projection), so one that is lost costs that gateway's followers its slow poll interval,
never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence

import httpx
import msgspec

from schemas.projection import Projected, ProjectedBatch

NOTIFY_PATH = "/internal/projected"
TOKEN_HEADER = "x-teaspill-notify-token"  # noqa: S105 - a header name, not a secret
TIMEOUT = 1.0
RETRY_AFTER = 1.0
log = logging.getLogger(__name__)


class Notifier:
    def __init__(
        self,
        urls: Sequence[str],
        token: str,
        client: httpx.AsyncClient,
        timeout: float = TIMEOUT,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        for url in urls:
            httpx.URL(url)  # a bad URL fails at start, not in a sender task
        self._gateways = [
            _Gateway(url.rstrip("/"), token, client, timeout, retry_after) for url in urls
        ]

    def tell(self, seqs: Mapping[str, int]) -> None:
        """Queue `seqs` (agent -> newest projected seq) for every gateway; returns at once."""
        for gateway in self._gateways:
            gateway.queue(seqs)

    async def close(self) -> None:
        for gateway in self._gateways:
            await gateway.close()


class _Gateway:
    def __init__(
        self, url: str, token: str, client: httpx.AsyncClient, timeout: float, retry_after: float
    ) -> None:
        self.url = url
        self._token = token
        self._client = client
        self._timeout = timeout
        self._retry_after = retry_after
        self._pending: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def queue(self, seqs: Mapping[str, int]) -> None:
        for agent, seq in seqs.items():
            self._pending[agent] = max(seq, self._pending.get(agent, 0))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"notify {self.url}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, {}
            if batch:
                await self._post(batch)
            if self._failing:  # keep what it missed for the next try, a while from now
                self.queue(batch)
                await asyncio.sleep(self._retry_after)

    async def _post(self, seqs: Mapping[str, int]) -> None:
        body = ProjectedBatch(tuple(Projected(a, s) for a, s in sorted(seqs.items())))
        try:
            async with asyncio.timeout(self._timeout):  # the whole request, not each read
                response = await self._client.post(
                    f"{self.url}{NOTIFY_PATH}",
                    content=msgspec.json.encode(body),
                    headers={TOKEN_HEADER: self._token, "content-type": "application/json"},
                )
            failure = None if response.is_success else f"answered {response.status_code}"
        except TimeoutError:
            failure = f"no answer within {self._timeout:g} s"
        except httpx.HTTPError as error:
            failure = repr(error)
        self._report(failure)

    def _report(self, failure: str | None) -> None:
        """One log line when a gateway stops taking notices, one when it takes them again."""
        if failure is not None and not self._failing:
            log.warning("%s%s: %s; it polls until it answers", self.url, NOTIFY_PATH, failure)
        elif failure is None and self._failing:
            log.info("%s%s answers again", self.url, NOTIFY_PATH)
        self._failing = failure is not None
