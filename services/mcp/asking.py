"""A server that asks for a person's input during a call, in both protocol generations.

On the stateless 2026-07-28 revision a call is answered "input required": the questions
(`InputAsked`) go on the step's result, the turn parks on them as on an approval, and the
person's answer (`InputAnswer`) sends the call again with the server's request state.
Only elicitations (a form, or a page to open) can be put to a person; a server that asks
for anything else (sampling, roots) is told no.

On the session-based revisions the question arrives mid-call on the open connection,
which cannot outlive the step, so it cannot wait for a person: `MidCall` accepts it with
the form's own defaults when every field has one, else declines it, and says which to the
model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mcp_types
import msgspec
from mcp.client.session import ClientRequestContext

from schemas.questions import MAX_ASKED, InputAnswer, InputAsked, Question, defaults_of


def asked_of(result: mcp_types.InputRequiredResult, leg: int) -> InputAsked | str:
    """The questions of an input-required result, or a sentence for what no person can
    answer here (or what is too big to keep)."""
    asked = _questions(result, leg)
    if isinstance(asked, str):
        return asked
    size = len(msgspec.json.encode(asked))
    if size > MAX_ASKED:
        return (
            f"asked for input with questions and request state of {size:,} bytes, more than "
            f"the {MAX_ASKED:,} a waiting call may keep"
        )
    return asked


def _questions(result: mcp_types.InputRequiredResult, leg: int) -> InputAsked | str:
    questions: dict[str, Question] = {}
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, mcp_types.ElicitRequest):
            return f"asked for {request.method}, which teaspill does not provide"
        params = request.params
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            questions[key] = Question(params.message, url=params.url)
        else:
            questions[key] = Question(params.message, dict(params.requested_schema))
    if not questions:
        return "asked for input without saying what it needs"
    return InputAsked(questions, result.request_state, leg)


def responses_of(answer: InputAnswer) -> dict[str, mcp_types.InputResponse]:
    """The person's answer as the call's `inputResponses`, one per question."""
    if not answer.accept:
        return {key: mcp_types.ElicitResult(action="decline") for key in answer.asked.questions}
    return {
        key: mcp_types.ElicitResult(
            action="accept", content=None if question.url else answer.answers.get(key, {})
        )
        for key, question in answer.asked.questions.items()
    }


@dataclass
class MidCall:
    """The elicitation callback of a session-based connection: it answers at once, and
    keeps a sentence for the model about each answer."""

    server: str
    notes: list[str] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        asked = f"The MCP server {self.server} asked for input during the call ({params.message!r})"
        defaults: dict[str, Any] | None = None
        if isinstance(params, mcp_types.ElicitRequestFormParams):
            defaults = defaults_of(dict(params.requested_schema))
        if defaults is not None:
            self.notes.append(f"{asked}; every field had a default, so it was accepted with them.")
            return mcp_types.ElicitResult(action="accept", content=defaults)
        self.notes.append(
            f"{asked}; on this server's protocol revision a call cannot wait for a person, "
            "so it was declined."
        )
        return mcp_types.ElicitResult(action="decline")
