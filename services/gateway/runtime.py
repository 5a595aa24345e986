"""What one gateway process holds: the projection reader, the upstream, the feeds, the
key cache and the stream slots."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import cast

from fastapi import Request

from services.gateway.feeds import Hub
from services.gateway.hooks import SigningKey
from services.gateway.keycache import KeyCache
from services.gateway.quotas import Quotas
from services.gateway.rates import DailyCap, RateLimiter, StreamSlots
from services.gateway.reader import ProjectionReader
from services.gateway.upstream import Upstream
from services.settings import Settings


class RecentSends:
    """Agents this gateway sent a first message to, until the projection shows them.

    A client follows `events_url` right after sending; the new agent is not in the catalog
    until its first event is projected, and it should not get a 404 meanwhile.
    """

    def __init__(self, ttl: float = 600.0, limit: int = 10_000) -> None:
        self._ttl = ttl
        self._limit = limit
        self._sent: OrderedDict[str, float] = OrderedDict()

    def add(self, address: str) -> None:
        self._sent[address] = time.monotonic() + self._ttl
        self._sent.move_to_end(address)
        while len(self._sent) > self._limit:
            self._sent.popitem(last=False)

    def __contains__(self, address: object) -> bool:
        expires = self._sent.get(str(address))
        if expires is None:
            return False
        if expires < time.monotonic():
            del self._sent[str(address)]
            return False
        return True


class HookTargets:
    """Whether each hook this gateway saw is aimed at one agent (else each delivery makes
    a new agent of its kind). A hook's target never changes, so what is kept stays true;
    a delivery to a hook it knows is checked without a round trip."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._aimed: OrderedDict[str, bool] = OrderedDict()

    def add(self, hook_id: str, *, aimed: bool) -> None:
        self._aimed[hook_id] = aimed
        self._aimed.move_to_end(hook_id)
        while len(self._aimed) > self._limit:
            self._aimed.popitem(last=False)

    def get(self, hook_id: str) -> bool | None:
        return self._aimed.get(hook_id)


@dataclass
class Runtime:
    settings: Settings
    projection: ProjectionReader
    ingress: Upstream
    hub: Hub
    heartbeat: float
    keys: KeyCache
    streams: StreamSlots
    quotas: Quotas
    hook_key: SigningKey
    """What each webhook's signing secret is derived from."""
    hook_rates: RateLimiter
    visitor_tokens: RateLimiter
    """Visitor tokens per publishable key (`POST /v1/visitors`)."""
    visitor_conversations: DailyCap
    """Conversations visitors create per publishable key, a day."""
    recent: RecentSends = field(default_factory=RecentSends)
    hook_targets: HookTargets = field(default_factory=HookTargets)

    async def close(self) -> None:
        await self.hub.close()
        await self.ingress.close()
        await self.projection.close()
        await self.keys.close()


def runtime(request: Request) -> Runtime:
    """A dependency: the runtime `create_app` put on the app."""
    return cast(Runtime, request.app.state.runtime)
