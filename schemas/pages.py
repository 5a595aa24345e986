"""Tools that run in the page: which of a page's declared tools a spec grants, and what the
model reads of a page's result. Pure: the gateway caps a result before it sends it, and
the agent holds it to the same caps when it arrives.

A page declares its tools (name, description, JSON Schema) with the message it sends; a
spec grants them as `page:NAME`, or all of them with `page:*`. The model sees a granted
page tool under the page's own name, so the call a page is handed names its own tool.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from schemas.chat import ToolDefinition
from schemas.spec import AgentSpec, grants

PAGE_PREFIX = "page:"
ALL_PAGE_TOOLS = "page:*"

ResultKind = Literal["response", "page", "other"]
"""What a page's result holds: a response body the page fetched, a read of the page, or
anything else."""

RESULT_CAPS: dict[ResultKind, int] = {"response": 16_000, "page": 16_000, "other": 20_000}
"""The most characters a page's result of each kind may take; past it the result is
dropped and the model is told so."""

UNKNOWN_PAGE_OUTCOME = (
    "The page that ran this request closed before it sent a result, so the call may or "
    "may not have taken effect there. It was not run again."
)
"""What the model reads when the page that claimed a request closed without its result."""

CLAIMED = "claimed"
"""A page's claim of a request: it runs the call."""
RESULT = "result"
"""A page's result of a request it claimed."""
CLOSED = "closed"
"""A page's stream to the conversation closed: what it claimed and did not answer is
unknown."""

MAX_PAGE_TOOLS = 32
MAX_PAGE_ID = 64
PAGE_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
PAGE_TOOL_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


def page_granted(spec: AgentSpec, name: str) -> bool:
    """Whether `spec` lets the model call the page's tool `name` (granted as `page:NAME`,
    or `page:*`, and not denied by its own name)."""
    own = grants(spec)
    policy = own.get(PAGE_PREFIX + name, own.get(ALL_PAGE_TOOLS))
    return policy is not None and policy != "deny"


def shown_page_tools(
    spec: AgentSpec, declared: Iterable[ToolDefinition], taken: Iterable[str]
) -> tuple[ToolDefinition, ...]:
    """The page's tools the model is shown: those the spec grants whose name no tool of
    the deployment (`taken`) already has, first declaration of a name first."""
    used = set(taken)
    shown: list[ToolDefinition] = []
    for tool in declared:
        if tool.name in used or not page_granted(spec, tool.name):
            continue
        used.add(tool.name)
        shown.append(tool)
    return tuple(shown)


def page_result(content: str, kind: ResultKind) -> tuple[str, bool]:
    """What the model reads of a page's result, and whether it was dropped: over its
    kind's cap the result is dropped and the model reads a sentence saying so."""
    cap = RESULT_CAPS[kind]
    if len(content) <= cap:
        return content, False
    what = {"response": "a response body", "page": "a page read", "other": "a result"}[kind]
    return (
        f"The page's result was {len(content):,} characters, more than the {cap:,} "
        f"{what} may take, so it was dropped; ask the page for less.",
        True,
    )
