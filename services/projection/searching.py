"""The searches a tool's step makes, in its own thread on a connection of its own: in the
SQLite file, or in the PostgreSQL store when the projection is one (`TEASPILL_PROJECTION_URL`)."""

from __future__ import annotations

from pathlib import Path

from schemas.knowledge import DocumentSearch, PassageHit
from schemas.memory import MemoryHit, MemorySearch
from services.projection import knowledge, memories, postgres_search

Where = Path | str
"""The SQLite file, or the PostgreSQL store's URL."""


def search_memories(where: Where, search: MemorySearch) -> list[MemoryHit]:
    if isinstance(where, str):
        return postgres_search.memories_now(where, search)
    return memories.search_now(where, search)


def search_documents(where: Where, search: DocumentSearch) -> list[PassageHit]:
    if isinstance(where, str):
        return postgres_search.passages_now(where, search)
    return knowledge.search_now(where, search)
