"""The effect ledger's clients: what a side-effecting call asks before it runs and tells
once it returned.

A journaled step interrupted by a crash runs again from scratch, and on replay the journal
cannot tell a first attempt from a second. So the step itself begins its key in the
ledger, first thing, and records its result before it returns: a retry finds either the
result (and returns it, without running the call again) or only the start (and reports an
unknown outcome). The ledger lives in Restate (the `Effects` object, `object.py`), so
every replica of an endpoint, and an endpoint restarted on a fresh disk, sees the same
entries.

Both methods are called from inside a step, on its worker thread (a plugin tool's step)
or through `asyncio.to_thread` (a workspace command's).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Protocol

import httpx

from schemas.effects import Begin, Claim, Finished
from services.contracts import BEGIN_EFFECT, FINISH_EFFECT
from services.ingress import Ingress, IngressError

log = logging.getLogger("teaspill.effects")
FINISH_ATTEMPTS = 3


def ledger_key(idempotency_key: str) -> str:
    """The `Effects` object's key: a digest, so any idempotency key makes a valid one."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


def owner_of(idempotency_key: str) -> str:
    """The agent an idempotency key (`agent/turn/round/call`) names."""
    agent, slash, _ = idempotency_key.partition("/")
    return agent if slash else ""


class EffectLedger(Protocol):
    def begin(self, idempotency_key: str) -> Claim:
        """Mark the key started; say what an earlier attempt left. Raises when the ledger
        cannot be reached: the step then fails before the call runs, and is retried."""
        ...

    def finish(self, idempotency_key: str, finished: Finished) -> None:
        """Record the call's result. Never raises: a result the ledger could not take is
        still the step's, journaled when the step returns."""
        ...


class RestateLedger:
    """The ledger in Restate, reached through ingress."""

    def __init__(self, ingress_url: str, *, timeout: float = 30.0) -> None:
        self._ingress = Ingress(ingress_url, timeout=timeout)

    def begin(self, idempotency_key: str) -> Claim:
        begun = Begin(owner_of(idempotency_key))
        return self._ingress.call(BEGIN_EFFECT, begun, ledger_key(idempotency_key))

    def finish(self, idempotency_key: str, finished: Finished) -> None:
        for attempt in range(1, FINISH_ATTEMPTS + 1):
            try:
                self._ingress.call(FINISH_EFFECT, finished, ledger_key(idempotency_key))
            except (IngressError, httpx.HTTPError) as error:
                log.warning("the ledger did not take a result (attempt %d): %s", attempt, error)
            else:
                return

    def close(self) -> None:
        self._ingress.close()


class MemoryLedger:
    """The ledger in this process's memory: for tests and in-process runs that have no
    Restate. It lasts as long as the process, so it protects only against retries within
    it."""

    def __init__(self) -> None:
        self._entries: dict[str, Finished | None] = {}
        self._lock = threading.Lock()

    def begin(self, idempotency_key: str) -> Claim:
        with self._lock:
            if idempotency_key not in self._entries:
                self._entries[idempotency_key] = None
                return Claim(first=True)
            return Claim(first=False, finished=self._entries[idempotency_key])

    def finish(self, idempotency_key: str, finished: Finished) -> None:
        with self._lock:
            self._entries[idempotency_key] = finished
