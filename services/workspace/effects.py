"""The effect ledger: a command runs at most once per idempotency key, even across
crashes.

A journaled step interrupted by a crash runs again from scratch, and on replay the journal
cannot tell a first attempt from a second. So the step itself claims its key, first thing,
in the `Effects` object (Restate state, keyed by a digest of the idempotency key) through
ingress: a second attempt finds the claim and reports an unknown outcome instead of
running the command again. The ledger lives in Restate, not in a file of one endpoint, so
any replica of the execution plane may take the retry.
"""

from __future__ import annotations

import hashlib

import httpx
import restate

from schemas.workspace import Claim, WorkspaceReply
from services.contracts import CLAIM, EFFECTS, FINISH, Empty
from services.ingress import AsyncIngress

STATE = "state"
REPLY = "reply"


def ledger_key(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


def effects_object() -> restate.VirtualObject:
    effects = restate.VirtualObject(
        EFFECTS, description="At-most-once ledger of side effects, one object per key."
    )

    @effects.handler(name=CLAIM.name)
    async def claim(ctx: restate.ObjectContext) -> Claim:
        if await ctx.get(STATE, type_hint=str) is None:
            ctx.set(STATE, "started")
            return Claim(first=True)
        return Claim(first=False, finished=await ctx.get(REPLY, type_hint=WorkspaceReply))

    @effects.handler(name=FINISH.name)
    async def finish(ctx: restate.ObjectContext, reply: WorkspaceReply) -> None:
        ctx.set(STATE, "finished")
        ctx.set(REPLY, reply)

    return effects


class EffectLedger:
    """Claims keys through Restate ingress, from inside a journaled step."""

    def __init__(self, ingress_url: str, client: httpx.AsyncClient) -> None:
        self._ingress = AsyncIngress(ingress_url, timeout=30)

    async def claim(self, idempotency_key: str) -> Claim:
        """Raises when Restate cannot be reached: the step then fails and is retried, and
        the retry's claim says whether the first one got through."""
        return await self._ingress.call(CLAIM, Empty(), ledger_key(idempotency_key))

    async def close(self) -> None:
        await self._ingress.close()
