"""The `Projector`'s fill of the vectors hybrid ranking compares (`TEASPILL_EMBEDDINGS_URL`).

Each memory record and each released document the `Projector` indexes asks for a fill of
its tenant (a one-way send to `vectors`, keyed `<tenant>:vectors`), and so does a rebuild
for every tenant it filled. A fill asks the embeddings server for the vectors of the
tenant's rows that have none of the model, a batch at a time, and keeps each batch in the
projection as it comes: the projection is the fill's checkpoint, not the journal (vectors
are derived data, and large), so an invocation retried after a crash makes only the
vectors not kept yet. The step's result is what it made and why it stopped.

While the embeddings server does not answer, searches rank by BM25 alone and the fill
tries again later: one attempt per tenant scheduled at a time (a delayed send to itself,
durable in Restate), waiting twice as long each time up to `LONGEST_WAIT`. A row written
meanwhile asks for a fill too, which tries at once, so vectors come back with the server.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

import restate

from schemas.projection import TenantNames, VectorFill, VectorsFilled
from services.contracts import FILL_VECTORS
from services.durable import send, step_options
from services.projection.embeddings import FILL_TIMEOUT, Embeddings, EmbeddingsError, configured
from services.projection.vectors import Unembedded

if TYPE_CHECKING:
    from services.projection.projector import Projection

log = logging.getLogger("teaspill.projection")
BATCH = 32
"""Texts sent to the embeddings server in one request."""
MOST_BATCHES = 16
"""Batches one fill's step makes at most, so that a step stays well within the handler's
inactivity and abort timeouts on a slow server (SmolLM2 on one thread: about 6 s a batch);
a fill that stops there sends the next one at once."""
FIRST_WAIT, LONGEST_WAIT = 5.0, 600.0
"""Seconds before the first retry after a failure, and between two at most."""
RETRY = "vectors.retry"
"""State: the seconds the scheduled retry waited (absent: none is scheduled)."""


def key_of(tenant: str) -> str:
    return f"{tenant}:vectors"


def ask(ctx: restate.ObjectContext, tenant: str) -> None:
    """Ask for a fill of the tenant's vectors, when hybrid ranking is on (one way)."""
    if configured() is not None:
        send(ctx, FILL_VECTORS, VectorFill(tenant), key=key_of(tenant))


async def fill(
    projection: Projection, tenant: str, embeddings: Embeddings, most: int = MOST_BATCHES
) -> VectorsFilled:
    """Make the vectors the tenant's rows lack, a batch at a time, each batch kept as it
    comes, `most` batches at most; stop at the first failure of the server."""
    made, tried = 0, set[tuple[str, tuple[object, ...]]]()
    model = embeddings.model
    while rows := await projection.apply(lambda store: store.unembedded(tenant, model, BATCH)):
        if len(tried) >= most * BATCH:
            return VectorsFilled(made, more=True)
        keys = {(row.table, row.key) for row in rows}
        if keys <= tried:
            return VectorsFilled(made, "Rows kept no vector: each changed while it was made.")
        tried |= keys
        try:
            vectors = await embeddings.embed([row.embedded for row in rows], wait=FILL_TIMEOUT)
        except EmbeddingsError as error:
            return VectorsFilled(made, str(error))
        await _keep(projection, model, list(zip(rows, vectors, strict=True)))
        made += len(rows)
    return VectorsFilled(made)


async def _keep(projection: Projection, model: str, filled: list[tuple[Unembedded, bytes]]) -> None:
    await projection.apply(lambda store: store.record_vectors(model, filled))


def vector_handlers(projector: restate.VirtualObject, projection: Projection) -> None:
    @projector.handler(name=FILL_VECTORS.name)
    async def vectors(ctx: restate.ObjectContext, asked: VectorFill) -> None:
        embeddings = configured()
        if embeddings is None:
            return
        waited = await ctx.get(RETRY, type_hint=float)
        if asked.retry:
            ctx.clear(RETRY)

        async def run() -> VectorsFilled:
            return await fill(projection, asked.tenant, embeddings)

        filled = await ctx.run_typed("fill", run, step_options(VectorsFilled))
        if filled.more:
            send(ctx, FILL_VECTORS, VectorFill(asked.tenant), key=ctx.key())
        if not filled.problem:
            return
        log.warning("vectors of %s: %s (%d made)", asked.tenant, filled.problem, filled.made)
        if waited is not None and not asked.retry:
            return  # the retry scheduled already will make them
        wait = min((waited or FIRST_WAIT / 2) * 2, LONGEST_WAIT)
        ctx.set(RETRY, wait)
        again = VectorFill(asked.tenant, retry=True)
        send(ctx, FILL_VECTORS, again, key=ctx.key(), delay=timedelta(seconds=wait))


async def ask_all(ctx: restate.ObjectContext, projection: Projection) -> None:
    """Ask for a fill of every tenant with rows that lack a vector (after a rebuild)."""
    embeddings = configured()
    if embeddings is None:
        return

    async def tenants() -> TenantNames:
        names = await projection.apply(lambda store: store.unembedded_tenants(embeddings.model))
        return TenantNames(tuple(names))

    for tenant in (await ctx.run_typed("tenants", tenants, step_options(TenantNames))).names:
        send(ctx, FILL_VECTORS, VectorFill(tenant), key=key_of(tenant))
