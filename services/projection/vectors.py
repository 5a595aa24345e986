"""The fill of the vectors hybrid ranking compares: what a tenant's rows lack, and the
statements that keep what the embeddings server made for them (both stores: SQLite's
placeholders, turned into PostgreSQL's by `postgres`).

A vector is derived data, like the rest of the projection: it is made from the row's
text, kept on the row (deleted with it, and so erased with it), and made again after a
rebuild. A vector is kept only if the row still holds the text it was made from, so a
record forgotten, or a document released again, while the server worked gets none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

UNEMBEDDED_MEMORIES = (
    "select id, text from memories where tenant = ?"
    " and (vector_model is null or vector_model <> ?) order by id limit ?"
)
UNEMBEDDED_PASSAGES = (
    "select document, n, section, text from passages where tenant = ?"
    " and (vector_model is null or vector_model <> ?) order by document, n limit ?"
)
SET_MEMORY = (
    "update memories set vector = ?, vector_model = ? where tenant = ? and id = ? and text = ?"
)
SET_PASSAGE = (
    "update passages set vector = ?, vector_model = ?"
    " where tenant = ? and document = ? and n = ? and text = ?"
)
TENANTS = (
    "select tenant from memories where vector_model is null or vector_model <> ?"
    " union select tenant from passages where vector_model is null or vector_model <> ?"
    " order by tenant"
)
"""The tenants with rows that lack a vector of the model."""


@dataclass(frozen=True)
class Unembedded:
    """A row without a vector of the model: a memory record (`key` its id) or a passage
    (`key` its document and number)."""

    table: Literal["memories", "passages"]
    tenant: str
    key: tuple[str, int] | tuple[str]
    text: str
    section: str = ""

    @property
    def embedded(self) -> str:
        """What the vector is made of: a passage's section names what it is about too."""
        return f"{self.section}\n{self.text}" if self.section else self.text


def unembedded(
    tenant: str, memories: Sequence[Sequence[Any]], passages: Sequence[Sequence[Any]]
) -> list[Unembedded]:
    found = [Unembedded("memories", tenant, (str(r[0]),), str(r[1])) for r in memories]
    found += [
        Unembedded("passages", tenant, (str(r[0]), int(r[1])), str(r[3]), str(r[2]))
        for r in passages
    ]
    return found


Updates = list[tuple[str, list[tuple[Any, ...]]]]


def updates(model: str, filled: Sequence[tuple[Unembedded, bytes]]) -> Updates:
    """The statements that keep each row's vector (if it still holds that text)."""
    rows: dict[str, list[tuple[Any, ...]]] = {SET_MEMORY: [], SET_PASSAGE: []}
    for row, vector in filled:
        statement = SET_MEMORY if row.table == "memories" else SET_PASSAGE
        rows[statement].append((vector, model, row.tenant, *row.key, row.text))
    return [(statement, kept) for statement, kept in rows.items() if kept]
