"""API key lookups: the projection says which key a hash is, the key's `Tenant` object's
stored record confirms it, and the answer is kept for `ttl` seconds.

The projection is derived data: a file restored from before a revocation would bring the
revoked key back. So a key the projection shows as valid is checked against its tenant's
record in Restate (the source of truth) before it is trusted, and the answer is cached.
A revoked key therefore stops working within `ttl` seconds on every gateway, and stays
refused whatever the projection says. A key whose tenant's erasure has begun (its
tombstone, read with the record) is refused too, from its next lookup on. A hash the
projection does not know is remembered for at most `NEGATIVE_SECONDS`, so a new key works
within that.

The record is read from restate-server's storage (`stored.StoredState`), not through a
`Tenant` handler: a handler needs the service endpoint, and a gateway restarted while the
endpoint is down must still take the approvals and stops Restate keeps for it.

When the record cannot be read (restate-server is down), a key this process confirmed
before keeps its last confirmed answer (a revocation goes through Restate too, so none
can have happened meanwhile but in the moment before it went down); any other key is
refused (503): authentication fails closed.

Lookups run on a projection reader of their own (one connection), so a slow read elsewhere in the
gateway never queues authentication; lookups of one hash at once share one read.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from schemas.lifecycle import Tombstone
from schemas.tenant import ApiKey, EndUsers, Keys
from services.contracts import TENANT_KEYS, TOMBSTONE
from services.gateway.errors import ApiError
from services.gateway.reader import ProjectionReader
from services.gateway.stored import StateUnreadableError, StoredState
from services.keys import same_hash

NEGATIVE_SECONDS = 1.0
LIMIT = 10_000
"""Hashes remembered; the least recently used is forgotten first."""


@dataclass(frozen=True)
class Held:
    """A key as its tenant's record holds it, with how that tenant's end users are named
    (the same stored value holds both)."""

    key: ApiKey
    end_users: EndUsers
    tombstone: Tombstone | None = None
    """Its tenant's, once the tenant's erasure has begun: the key is refused then."""


class KeyUncheckableError(ApiError):
    def __init__(self) -> None:
        super().__init__(
            503, "the API key cannot be checked right now (Restate does not answer); retry soon"
        )


class KeyCache:
    def __init__(
        self,
        projection: ProjectionReader,
        records: StoredState,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.projection = projection
        self.ttl = ttl
        self._records = records
        self._clock = clock
        self._known: OrderedDict[str, tuple[Held | None, float]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[Held | None]] = {}
        self._origins: tuple[frozenset[str], float] = (frozenset(), -1.0)
        self._missed: OrderedDict[str, float] = OrderedDict()
        self._reading: asyncio.Future[frozenset[str]] | None = None

    async def listed(self, origin: str) -> bool:
        """Whether a publishable key lists `origin` (a preflight carries no key). The
        origins are read from the projection at most once a `ttl` (a second when there is
        no cache); an origin they do not hold is read again, and remembered as unlisted
        for at most `NEGATIVE_SECONDS`, so the origin of a new key is answered within that,
        as the key itself is."""
        known, until = self._origins
        now = self._clock()
        if until > now and origin in known:
            return True
        missed = self._missed.get(origin)
        if until > now and missed is not None and missed > now:
            return False
        found = await self._read_origins()
        if origin not in found:
            self._missed[origin] = self._clock() + NEGATIVE_SECONDS
            self._missed.move_to_end(origin)
            if len(self._missed) > LIMIT:
                self._missed.popitem(last=False)
        return origin in found

    async def _read_origins(self) -> frozenset[str]:
        """One read of the projection's origins at a time, shared by who asks meanwhile."""
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._origins_now())
            self._reading.add_done_callback(lambda _: setattr(self, "_reading", None))
        return await asyncio.shield(self._reading)

    async def _origins_now(self) -> frozenset[str]:
        found = await self.projection.read(lambda store: store.publishable_origins())
        self._origins = (found, self._clock() + max(self.ttl, NEGATIVE_SECONDS))
        self._missed.clear()
        return found

    async def find(self, hash_: str) -> Held | None:
        """The key with this hash as its tenant holds it (revoked or not); None when
        there is none."""
        known = self._known.get(hash_)
        if known is not None and known[1] > self._clock():
            self._known.move_to_end(hash_)
            return known[0]
        pending = self._pending.get(hash_)
        if pending is None:
            pending = asyncio.ensure_future(self._look_up(hash_))
            self._pending[hash_] = pending
            pending.add_done_callback(lambda _: self._pending.pop(hash_, None))
        return await asyncio.shield(pending)

    async def _look_up(self, hash_: str) -> Held | None:
        key = await self.projection.read(lambda store: store.key_by_hash(hash_))
        held = None if key is None else Held(key, EndUsers())
        if key is not None and key.revoked_at is None:
            try:
                held = await self._confirmed(key)
            except KeyUncheckableError:
                if (stale := self._known.get(hash_)) is not None:
                    return stale[0]
                raise
        ttl = self.ttl if held is not None else min(self.ttl, NEGATIVE_SECONDS)
        if ttl > 0:
            self._known[hash_] = (held, self._clock() + ttl)
            self._known.move_to_end(hash_)
            if len(self._known) > LIMIT:
                self._known.popitem(last=False)
        return held

    async def _confirmed(self, key: ApiKey) -> Held | None:
        """The tenant's own record of `key`: revoked there, or unknown there, wins; so does
        the tenant's tombstone, read with it."""
        try:
            found = await self._records.read(TENANT_KEYS, key.tenant)
            tombstone = await self._records.read(TOMBSTONE, key.tenant)
        except StateUnreadableError as error:
            raise KeyUncheckableError from error
        if tombstone is not None:
            return Held(key, EndUsers(), tombstone)
        held = found or Keys()
        for record in held.keys:
            if record.id == key.id and same_hash(record.hash, key.hash):
                return Held(record, held.end_users)
        return None

    async def refuse_if_erased(self, tenant: str) -> None:
        """410 with the tombstone's sentence once `tenant`'s erasure has begun, read now
        (asked before something new is made in it)."""
        try:
            tombstone = await self._records.read(TOMBSTONE, tenant)
        except StateUnreadableError as error:
            raise KeyUncheckableError from error
        if tombstone is not None:
            raise ApiError(410, tombstone.sentence(tenant))

    def forget(self) -> None:
        self._known.clear()
        self._origins = (frozenset(), -1.0)
        self._missed.clear()

    async def close(self) -> None:
        await self.projection.close()
        await self._records.close()
