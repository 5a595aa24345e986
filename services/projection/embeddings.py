"""Vectors from an OpenAI-compatible embeddings server (`TEASPILL_EMBEDDINGS_URL`), for
hybrid ranking: its `POST {url}/embeddings` with a list of texts answers one vector per
text (`data[i].embedding`, in the order sent, or ordered by `data[i].index`).

A vector is kept as little-endian float32 bytes, scaled to unit length, so that the
cosine of two is their dot product. A server that answers anything else (a list of
per-token vectors, as llama.cpp's server does for a causal model run without pooling, a
status other than 200, a count other than the texts', an answer longer than
`answer_cap` bytes, read no further) raises `EmbeddingsError`, whose
message is one sentence; the search then ranks by BM25 alone and says so.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from schemas.memory import Ranking
from services.settings import Settings, settings

log = logging.getLogger("teaspill.embeddings")
MAX_INPUT_CHARS = 2_000
"""Characters of a text sent to the server at most (a passage holds at most 1,500)."""
FILL_TIMEOUT = 120.0
"""Seconds a batch of the fill waits for its vectors (a CPU server is slow)."""
MAX_DIMENSIONS = 65_536
"""Numbers in one vector at most (models in use have a few thousand)."""
NUMBER_BYTES = 24
"""Bytes of one number of a vector in JSON at most (`-1.2345678901234567e-05, `)."""
ANSWER_ROOM = 64 * 1024


class EmbeddingsError(RuntimeError):
    """The server did not give one vector per text."""


@dataclass(frozen=True)
class Embeddings:
    url: str
    model: str
    key: str = ""
    timeout: float = 5.0
    transport: httpx.MockTransport | None = None
    """A fake server (tests): `httpx.MockTransport` serves both kinds of client."""

    @property
    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.key}"} if self.key else {}

    def _body(self, texts: Sequence[str]) -> dict[str, Any]:
        return {"model": self.model, "input": [t[:MAX_INPUT_CHARS] for t in texts]}

    def embed_now(self, texts: Sequence[str], timeout: float | None = None) -> list[bytes]:
        """The texts' vectors, in this thread."""
        cap = answer_cap(len(texts))
        try:
            with (
                httpx.Client(transport=self.transport) as client,
                client.stream(
                    "POST",
                    f"{self.url}/embeddings",
                    json=self._body(texts),
                    headers=self._headers,
                    timeout=timeout or self.timeout,
                ) as answer,
            ):
                body = _capped(answer.iter_bytes(), cap) if answer.status_code == 200 else b""
        except httpx.HTTPError as error:
            raise EmbeddingsError(_unreachable(error)) from None
        return vectors(answer.status_code, body, len(texts))

    async def embed(
        self,
        texts: Sequence[str],
        wait: float | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> list[bytes]:
        """The texts' vectors."""
        try:
            if client is not None:
                status, body = await self._post(client, texts, wait)
            else:
                async with httpx.AsyncClient(transport=self.transport) as own:
                    status, body = await self._post(own, texts, wait)
        except httpx.HTTPError as error:
            raise EmbeddingsError(_unreachable(error)) from None
        return vectors(status, body, len(texts))

    async def _post(
        self, client: httpx.AsyncClient, texts: Sequence[str], wait: float | None
    ) -> tuple[int, bytes]:
        """The answer's status and, for a 200, its body, read no further than its cap."""
        cap, body = answer_cap(len(texts)), bytearray()
        async with client.stream(
            "POST",
            f"{self.url}/embeddings",
            json=self._body(texts),
            headers=self._headers,
            timeout=wait or self.timeout,
        ) as answer:
            if answer.status_code != 200:
                return answer.status_code, b""
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > cap:
                    raise EmbeddingsError(_too_large(cap))
        return answer.status_code, bytes(body)


def configured(given: Settings | None = None) -> Embeddings | None:
    """The embeddings server the settings name; None when hybrid ranking is off."""
    s = given or settings()
    if not s.embeddings_url:
        return None
    url = s.embeddings_url.rstrip("/")
    return Embeddings(url, s.embeddings_model, s.embeddings_key, s.embeddings_timeout_seconds)


def answer_cap(count: int) -> int:
    """Bytes of an answer for `count` texts read at most: `MAX_DIMENSIONS` numbers of a
    vector each, written out at length, and some room for the rest."""
    return ANSWER_ROOM + count * MAX_DIMENSIONS * NUMBER_BYTES


def _capped(chunks: Iterable[bytes], cap: int) -> bytes:
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > cap:
            raise EmbeddingsError(_too_large(cap))
    return bytes(body)


def _too_large(cap: int) -> str:
    return f"The embeddings server's answer is longer than {cap:,} bytes."


def vectors(status: int, answer: bytes, count: int) -> list[bytes]:
    """One unit-length float32 vector per text from the server's answer: `data` holds
    `count` objects, their `index`es (when given) are 0 to count - 1 once each, and their
    `embedding`s are flat lists of finite numbers of one length."""
    if status != 200:
        raise EmbeddingsError(f"The embeddings server answered {status}.")
    try:
        body = json.loads(answer)
    except (ValueError, RecursionError):
        raise EmbeddingsError("The embeddings server's answer is not JSON.") from None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise EmbeddingsError("The embeddings server's answer has no list of objects in data.")
    if len(data) != count:
        raise EmbeddingsError(
            f"The embeddings server answered {len(data)} vectors for {count} texts."
        )
    if any("index" in item for item in data):
        indices = [item.get("index") for item in data]
        if sorted(i for i in indices if type(i) is int) != list(range(count)):
            raise EmbeddingsError(
                "The embeddings server's indices are not each text's position once."
            )
        data = sorted(data, key=lambda item: int(item["index"]))
    found = [_flat(item.get("embedding")) for item in data]
    if len({v.size for v in found}) != 1:
        raise EmbeddingsError("The embeddings server's vectors are not all of one length.")
    return [unit(v) for v in found]


NOT_FLAT = (
    "The embeddings server did not answer one flat vector of numbers per text (for"
    " llama.cpp's server, a pooling type such as mean is needed)."
)


def _flat(embedding: object) -> np.ndarray[Any, np.dtype[Any]]:
    """One vector: a flat, non-empty list of finite numbers."""
    vector = None
    if isinstance(embedding, list) and 0 < len(embedding) <= MAX_DIMENSIONS:
        with contextlib.suppress(ValueError, TypeError), np.errstate(all="ignore"):
            vector = np.asarray(embedding, dtype="<f4")  # past float32's range: inf
    if vector is None or vector.ndim != 1:
        raise EmbeddingsError(NOT_FLAT)
    if not np.isfinite(vector).all():
        raise EmbeddingsError("The embeddings server answered a vector that is not finite.")
    return vector


def unit(vector: np.ndarray[Any, np.dtype[Any]]) -> bytes:
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm else vector).astype("<f4").tobytes()


def _unreachable(error: httpx.HTTPError) -> str:
    return f"The embeddings server did not answer ({type(error).__name__})."


@dataclass(frozen=True)
class QueryVector:
    """A query's vector, or why there is none (`note`, a sentence for the answer)."""

    vector: bytes | None = None
    model: str = ""
    """The model that made it: only rows' vectors of the same model are compared."""
    note: str = ""


FALLBACK = "ranked by BM25 alone"


def ranking_of(query: QueryVector) -> Ranking:
    return "hybrid" if query.vector is not None else "bm25"


def query_now(text: str, given: Embeddings | None = None) -> QueryVector:
    """The query's vector when hybrid ranking is on, in this thread; on a failure, a note
    (logged) and no vector."""
    embeddings = given or configured()
    if embeddings is None:
        return QueryVector()
    try:
        return QueryVector(embeddings.embed_now([text])[0], embeddings.model)
    except EmbeddingsError as error:
        return _fallback(error)


async def query_vector(text: str, embeddings: Embeddings | None) -> QueryVector:
    """The query's vector from `embeddings` (None: hybrid ranking is off); on a failure, a
    note (logged) and no vector."""
    if embeddings is None:
        return QueryVector()
    try:
        return QueryVector((await embeddings.embed([text]))[0], embeddings.model)
    except EmbeddingsError as error:
        return _fallback(error)


def _fallback(error: EmbeddingsError) -> QueryVector:
    note = f"{str(error).removesuffix('.')}: {FALLBACK}."
    log.warning("search %s", note)
    return QueryVector(note=note)
