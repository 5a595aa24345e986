"""Hybrid ranking's parts, with a fake embeddings server (`httpx.MockTransport`):
reciprocal-rank fusion, the nearest rows, what an answer must be to give vectors, the
fallback note, and the fill that keeps a batch at a time and stops at a failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from schemas.memory import MemoryRecord, MemoryScope
from services.projection.embeddings import (
    Embeddings,
    EmbeddingsError,
    answer_cap,
    query_now,
    unit,
)
from services.projection.filling import BATCH, fill
from services.projection.hybrid import fuse, nearest
from services.projection.projector import Projection
from services.stack.process import free_port

U = MemoryScope("acme", "user", "u1")


def test_fusion_favours_what_both_lists_rank_high_and_keeps_bm25s_order_on_ties() -> None:
    assert fuse(["a", "b", "c"], ["b"], 3) == ["b", "a", "c"]
    assert fuse(["a", "b"], ["b", "a"], 2) == ["a", "b"]  # a tie: BM25's order
    assert fuse([], ["x", "y"], 1) == ["x"]
    assert fuse(["a"], [], 5) == ["a"]


def test_nearest_ranks_by_cosine_and_leaves_out_vectors_of_another_length() -> None:
    def v(*xs: float) -> bytes:
        return unit(np.asarray(xs, dtype="<f4"))

    rows = [("far", v(1, 0)), ("near", v(0.1, 1)), ("odd", v(0, 1, 0)), ("mid", v(1, 1))]
    assert nearest(v(0, 1), rows) == ["near", "mid", "far"]
    assert nearest(v(0, 1), rows, n=1) == ["near"]
    assert nearest(b"", rows) == []


def server(answer: object, status: int = 200) -> Embeddings:
    def handle(request: httpx.Request) -> httpx.Response:
        # as a server might, NaN and Infinity too, which JSON itself has no words for
        return httpx.Response(status, content=json.dumps(answer).encode())

    return Embeddings("http://embeddings/v1", "m", transport=httpx.MockTransport(handle))


def test_an_answer_gives_one_unit_vector_per_text_in_index_order() -> None:
    answer = {"data": [{"index": 1, "embedding": [0, 2]}, {"index": 0, "embedding": [3, 4]}]}
    first, second = server(answer).embed_now(["a", "b"])
    assert np.frombuffer(first, dtype="<f4").tolist() == pytest.approx([0.6, 0.8])
    assert np.frombuffer(second, dtype="<f4").tolist() == pytest.approx([0.0, 1.0])


def test_per_token_vectors_of_a_causal_model_without_pooling_are_refused() -> None:
    answer = {"data": [{"index": 0, "embedding": [[0.1, 0.2], [0.3, 0.4]]}]}
    with pytest.raises(EmbeddingsError, match=r"one flat vector of numbers .* pooling type"):
        server(answer).embed_now(["two tokens"])
    with pytest.raises(EmbeddingsError, match="answered 500"):
        server({"error": "down"}, 500).embed_now(["a"])
    with pytest.raises(EmbeddingsError, match=r"answered 1 vectors for 2 texts"):
        server({"data": [{"index": 0, "embedding": [1.0]}]}).embed_now(["a", "b"])


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        ([1, 2], "no list of objects in data"),
        ({"data": [1]}, "no list of objects in data"),
        ({"data": {"embedding": [1.0]}}, "no list of objects in data"),
        ({"data": [{"index": 0, "embedding": "1,2"}]}, "one flat vector of numbers"),
        ({"data": [{"index": 0, "embedding": []}]}, "one flat vector of numbers"),
        ({"data": [{"index": 0, "embedding": [1, "x"]}]}, "one flat vector of numbers"),
        ({"data": [{"index": 0, "embedding": [1, None]}]}, "not finite"),
        ({"data": [{"index": 0, "embedding": [0.0] * 70_000}]}, "one flat vector of numbers"),
        ({"data": [{"index": 0, "embedding": [1.0, 1e39]}]}, "not finite"),
        ({"data": [{"index": 0, "embedding": [1.0, float("nan")]}]}, "not finite"),
        ({"data": [{"index": 0}, {"index": 0}]}, "each text's position once"),
        ({"data": [{"index": 0}, {"index": 5}]}, "each text's position once"),
        ({"data": [{"index": "0"}, {"index": 1}]}, "each text's position once"),
        ({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]}, "not all of one length"),
    ],
)
def test_a_malformed_answer_is_refused_with_a_sentence(answer: object, sentence: str) -> None:
    """Whatever the server answers, a search gets an EmbeddingsError (and ranks by BM25)
    and never another exception."""
    data = answer.get("data") if isinstance(answer, dict) else None
    texts = ["text"] * (len(data) if isinstance(data, list) else 1)
    with pytest.raises(EmbeddingsError, match=sentence):
        server(answer).embed_now(texts)


class Endless(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A 200 whose body never ends, counting the bytes it gave."""

    CHUNK = b"[" * 65_536

    def __init__(self) -> None:
        self.given = 0

    def __iter__(self) -> Iterator[bytes]:
        while True:
            self.given += len(self.CHUNK)
            yield self.CHUNK

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self:
            yield chunk


def test_an_answer_past_its_cap_is_refused_unread() -> None:
    """A server that answers without end (or far more than any vectors need) is cut off
    at the cap, in the thread's reads and the loop's."""
    body = Endless()
    endless = Embeddings(
        "http://embeddings/v1",
        "m",
        transport=httpx.MockTransport(lambda _: httpx.Response(200, stream=body)),
    )
    cap = answer_cap(2)
    sentence = f"The embeddings server's answer is longer than {cap:,} bytes."
    with pytest.raises(EmbeddingsError) as now:
        endless.embed_now(["a", "b"])
    assert str(now.value) == sentence
    assert cap < body.given <= cap + len(Endless.CHUNK)
    body.given = 0
    with pytest.raises(EmbeddingsError) as later:
        asyncio.run(endless.embed(["a", "b"]))
    assert str(later.value) == sentence
    assert cap < body.given <= cap + len(Endless.CHUNK)


def test_a_server_that_does_not_answer_leaves_a_note_and_no_vector() -> None:
    down = Embeddings(f"http://127.0.0.1:{free_port()}/v1", "m", timeout=2)
    query = query_now("tea", down)
    assert query.vector is None
    assert (
        query.note == "The embeddings server did not answer (ConnectError): ranked by BM25 alone."
    )


def test_the_fill_keeps_each_batch_and_stops_at_the_first_failure(tmp_path: Path) -> None:
    asked: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        asked.append(len(texts))
        if len(asked) == 2:
            return httpx.Response(503)
        return httpx.Response(
            200, json={"data": [{"index": i, "embedding": [1, i]} for i, _ in enumerate(texts)]}
        )

    at = datetime(2026, 12, 1, tzinfo=UTC)
    records = [MemoryRecord(f"m{i:03}", U, "episodic", f"note {i}", at) for i in range(BATCH + 5)]
    more = [MemoryRecord(f"n{i:03}", U, "episodic", f"later {i}", at) for i in range(BATCH + 3)]
    embeddings = Embeddings("http://embeddings/v1", "m", transport=httpx.MockTransport(handle))

    async def go() -> None:
        projection = Projection(tmp_path / "p.db")
        await projection.apply(lambda store: store.record_memories(records))
        stopped = await fill(projection, "acme", embeddings)
        assert (stopped.made, stopped.problem) == (BATCH, "The embeddings server answered 503.")
        done = await fill(projection, "acme", embeddings)
        assert (done.made, done.problem) == (5, "")
        assert await fill(projection, "acme", embeddings) == type(done)(0, "")
        await projection.apply(lambda store: store.record_memories(more))
        first = await fill(projection, "acme", embeddings, most=1)
        assert (first.made, first.more) == (BATCH, True), "one batch, and more to make"
        rest = await fill(projection, "acme", embeddings, most=1)
        assert (rest.made, rest.more) == (3, False)
        await projection.close()

    asyncio.run(go())
    assert asked == [BATCH, 5, 5, BATCH, 3]
