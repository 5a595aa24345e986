"""Hybrid ranking on a real stack (restate-server, the endpoint, the gateway) on each
store, with SmolLM2's vectors from llama-cpp-python's server (mean pooling): the
`Projector` fills the vectors of what is kept, a query sharing no word with any record
finds the user's records in the server's own cosine order, another user's and another
tenant's identical records are never among them, a rebuild makes every vector again, and
with the server down the search answers by BM25 alone with a note, and the vector missing
meanwhile is made once it is back.

SmolLM2 is a chat model, not an embeddings model: its mean-pooled vectors put every short
text close to every other (cosines of 0.8 to 0.9), and the longer sentences come first
for most queries. So these tests check the mechanics (which rows are compared, in which
order, what is fused and what never is), not that SmolLM2 finds meaning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from services.contracts import REBUILD, REBUILD_KEY, Empty
from services.projection.stores import open_store
from tests.durable.conftest import eventually
from tests.durable.model_server import MODEL_ID, EmbeddingsServer
from tests.fixtures.postgres import Cluster
from tests.gateway.test_stack import GatewayStack, gateway_stack, made_key

pytestmark = [pytest.mark.durable, pytest.mark.model]

NOTES = (
    "Invoices are due on the fifth of each month.",
    "The office wifi password is written on the fridge.",
    "She prefers tea over coffee.",
)
QUERY = "payment deadline"
"""No word of it is in any note: BM25 alone finds nothing."""


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer(tmp_path_factory.mktemp("embeddings"))
    server.start()
    try:
        yield server
    finally:
        server.process.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def site(
    request: pytest.FixtureRequest, tmp_path: Path, embeddings: EmbeddingsServer
) -> Iterator[GatewayStack]:
    url = ""
    if request.param == "postgres":
        server: Cluster = request.getfixturevalue("postgres")
        url = server.database()
    with gateway_stack(
        tmp_path / "home",
        embeddings_url=embeddings.base_url,
        embeddings_model=MODEL_ID,
        projection_url=url,
    ) as stack:
        yield stack


def unembedded(gw: GatewayStack, tenant: str) -> int:
    async def count() -> int:
        store = await open_store(gw.settings.projection_url, gw.settings.home, readonly=True)
        try:
            return len(await store.unembedded(tenant, MODEL_ID, 100))
        finally:
            await store.close()

    return asyncio.run(count())


def filled(gw: GatewayStack, *tenants: str) -> None:
    def done() -> bool | None:
        return all(unembedded(gw, tenant) == 0 for tenant in tenants) or None

    eventually(done, 120, f"the vectors of {', '.join(tenants)}")


def keep(gw: GatewayStack, auth: dict[str, str], text: str, user: str) -> str:
    body = {"text": text, "scope": "user", "user": user}
    kept = gw.http.post("/v1/memory", json=body, headers=auth)
    assert kept.status_code == 201, kept.text
    return str(kept.json()["id"])


def search(gw: GatewayStack, auth: dict[str, str], q: str, user: str) -> dict[str, Any]:
    found = gw.http.get("/v1/memory", params={"q": q, "scope": "user", "user": user}, headers=auth)
    assert found.status_code == 200, found.text
    answer: dict[str, Any] = found.json()
    return answer


def cosine_order(server: EmbeddingsServer, query: str, texts: list[str]) -> list[str]:
    data = httpx.post(
        f"{server.base_url}/embeddings", json={"input": [query, *texts]}, timeout=60
    ).json()["data"]
    vectors = np.asarray([item["embedding"] for item in data], dtype=float)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = vectors[1:] @ vectors[0]
    return [texts[int(i)] for i in np.argsort(-similarity, kind="stable")]


def test_hybrid_ranks_within_the_scope_by_the_servers_vectors(
    site: GatewayStack, embeddings: EmbeddingsServer
) -> None:
    gw = site
    mine = {keep(gw, gw.auth, text, "u1"): text for text in NOTES}
    theirs = {keep(gw, gw.auth, text, "u2") for text in NOTES}
    other = {"Authorization": f"Bearer {made_key(gw.settings, gw.http, 'globex', 'write')}"}
    globex = {keep(gw, other, text, "u1") for text in NOTES}
    filled(gw, "acme", "globex")

    answer = search(gw, gw.auth, QUERY, "u1")
    assert answer["ranking"] == "hybrid"
    assert "note" not in answer
    found = [hit["record"]["id"] for hit in answer["memories"]]
    assert set(found) == set(mine)
    assert not (theirs | globex) & set(found)
    assert [mine[id_] for id_ in found] == cosine_order(embeddings, QUERY, list(NOTES))
    # A word of one note: BM25's list holds it, and it comes first.
    assert search(gw, gw.auth, "wifi", "u1")["memories"][0]["record"]["id"] == next(
        id_ for id_, text in mine.items() if "wifi" in text
    )

    draft = gw.http.post(
        "/v1/knowledge", json={"title": "Guide", "text": "Boats moor at the east pier."},
        headers=gw.auth,
    )  # fmt: skip
    assert draft.status_code == 201, draft.text
    document = draft.json()["id"]
    released = gw.http.post(f"/v1/knowledge/{document}/release", headers=gw.auth)
    assert released.status_code == 200, released.text
    filled(gw, "acme")
    passages = gw.http.get("/v1/knowledge/search", params={"q": QUERY}, headers=gw.auth).json()
    assert passages["ranking"] == "hybrid"
    assert [p["document"] for p in passages["passages"]] == [document]
    theirs_passages = gw.http.get("/v1/knowledge/search", params={"q": QUERY}, headers=other)
    assert theirs_passages.json()["passages"] == []

    # A rebuild empties the projection, vectors too, and asks for them all again.
    report = gw.ingress.call(REBUILD, Empty(), REBUILD_KEY)
    assert (report.memories, report.documents) == (9, 1)
    filled(gw, "acme", "globex")
    again = search(gw, gw.auth, QUERY, "u1")
    assert [hit["record"]["id"] for hit in again["memories"]] == found


def test_a_down_server_leaves_bm25_and_the_vector_is_made_once_it_is_back(
    site: GatewayStack, embeddings: EmbeddingsServer
) -> None:
    gw = site
    embeddings.process.stop()
    try:
        kept = keep(gw, gw.auth, "The boiler is serviced every October.", "u1")
        answer = search(gw, gw.auth, "boiler", "u1")
        assert [hit["record"]["id"] for hit in answer["memories"]] == [kept]
        assert "ranking" not in answer  # bm25, the default
        assert answer["note"] == (
            "The embeddings server did not answer (ConnectError): ranked by BM25 alone."
        )
        assert unembedded(gw, "acme") == 1
    finally:
        embeddings.start()
    filled(gw, "acme")
    assert search(gw, gw.auth, "boiler", "u1")["ranking"] == "hybrid"
