"""The searches a tool's step makes, in its own thread on a connection of its own: in the
SQLite file, or in the PostgreSQL store when the projection is one (`TEASPILL_PROJECTION_URL`).
With an embeddings server set (`TEASPILL_EMBEDDINGS_URL`), the query's vector is asked of
it first and the ranking is hybrid; when it does not answer, BM25's alone (logged)."""

from __future__ import annotations

from pathlib import Path

from schemas.knowledge import DocumentSearch, PassageHit
from schemas.memory import MemoryHit, MemorySearch
from services.projection import embeddings, knowledge, memories, postgres_search

Where = Path | str
"""The SQLite file, or the PostgreSQL store's URL."""


def search_memories(where: Where, search: MemorySearch) -> list[MemoryHit]:
    query = embeddings.query_now(search.query)
    if isinstance(where, str):
        return postgres_search.memories_now(where, search, query)
    return memories.search_now(where, search, query)


def search_documents(where: Where, search: DocumentSearch) -> list[PassageHit]:
    query = embeddings.query_now(search.query)
    if isinstance(where, str):
        return postgres_search.passages_now(where, search, query)
    return knowledge.search_now(where, search, query)
