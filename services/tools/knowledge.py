"""`search_docs`: passages of the tenant's released knowledge documents, found by words,
each with the document and the position a reply cites. The tenant is the server's, taken
from the agent's address, never from what the model writes."""

from __future__ import annotations

from typing import Any

from schemas.address import tenant_of
from schemas.chat import ToolDefinition, canonical
from schemas.knowledge import DocumentSearch
from services.projection.searching import Where, search_documents
from services.tools.base import FunctionTool, ToolContext, ToolError

SEARCH_DOCS = "search_docs"
SHOWN = 5
"""Passages one search returns at most."""

DEFINITION = ToolDefinition(
    name=SEARCH_DOCS,
    description=(
        "Find passages of the organisation's documents by words. Each result names its "
        "document (`document`, `title`) and its place (`passage`, `section`): cite them."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for."}},
        "required": ["query"],
    },
)


def search_docs_tool(projection: Where) -> FunctionTool:
    def search(arguments: dict[str, Any], context: ToolContext) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("search_docs needs `query`, words to look for.")
        found = search_documents(projection, DocumentSearch(tenant_of(context.agent), query, SHOWN))
        passages = [
            {"document": h.document, "title": h.title, "passage": h.passage.n,
             "section": h.passage.section, "text": h.passage.text,
             **({"page": h.passage.page} if h.passage.page else {})}
            for h in found
        ]  # fmt: skip
        return canonical({"passages": passages})

    return FunctionTool(DEFINITION, search)
