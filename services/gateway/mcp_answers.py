"""The approvals a turn waits on as an MCP client's input requests, and the client's
responses as the answers the gateway sends.

An approval of a plain call is one form (approve, and a note for the model). An approval
whose call itself asks for input (`questions`: an MCP server's own input requests) passes
each question through as it was asked, keyed `request_id/question`: accepting every one
approves the call with the forms' content as its `answers`, declining any denies it.
"""

from __future__ import annotations

from typing import Any

from schemas.events import ApprovalRequested
from schemas.questions import Question
from services.gateway.models import ApprovalIn

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "description": "true runs the call; false denies it."},
        "note": {"type": "string", "description": "A note the model will read."},
    },
    "required": ["approve"],
}
MAX_NOTE = 2000


def question_key(request_id: str, key: str) -> str:
    return f"{request_id}/{key}"


def input_requests(
    address: str, asked: tuple[ApprovalRequested, ...], problems: dict[str, str] | None = None
) -> dict[str, Any]:
    """Each approval the turn waits on as its elicitations; the message of one in
    `problems` (per request id) starts with why its last answer was refused."""
    found: dict[str, Any] = {}
    for approval in asked:
        said = (problems or {}).get(approval.request_id)
        if not approval.questions:
            message = (
                f"Agent {address} asks to call tool {approval.name} with "
                f"{approval.arguments}: approve it?"
            )
            found[approval.request_id] = _form(_said(said, message), APPROVAL_SCHEMA)
            continue
        for key, question in approval.questions.items():
            found[question_key(approval.request_id, key)] = _question(
                question_key(approval.request_id, key), question, said
            )
    return found


def _said(problem: str | None, message: str) -> str:
    return f"{problem} {message}" if problem else message


def _form(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    params = {"mode": "form", "message": message, "requestedSchema": schema}
    return {"method": "elicitation/create", "params": params}


def _question(key: str, question: Question, problem: str | None) -> dict[str, Any]:
    message = _said(problem, question.message)
    if not question.url:
        return _form(message, question.schema)
    params = {"mode": "url", "message": message, "url": question.url, "elicitationId": key}
    return {"method": "elicitation/create", "params": params}


def answer_of(asked: ApprovalRequested, responses: dict[str, Any]) -> ApprovalIn | None:
    """The answer the client's responses give to `asked`; None when they hold none for it
    (or none of a form it can read)."""
    if not asked.questions:
        return _approval(responses.get(asked.request_id))
    given = {
        key: responses[question_key(asked.request_id, key)]
        for key in asked.questions
        if question_key(asked.request_id, key) in responses
    }
    if not given or not all(isinstance(response, dict) for response in given.values()):
        return None
    actions = {response.get("action") for response in given.values()}
    if "decline" in actions:
        return ApprovalIn(approve=False)
    if actions != {"accept"}:
        return None
    answers = {
        key: response.get("content") or {}
        for key, response in given.items()
        if not asked.questions[key].url
    }
    if not all(isinstance(values, dict) for values in answers.values()):
        return None
    return ApprovalIn(approve=True, answers=answers)


def _approval(response: Any) -> ApprovalIn | None:
    if not isinstance(response, dict):
        return None
    action = response.get("action")
    content = response.get("content")
    if action == "decline":
        return ApprovalIn(approve=False)
    if action != "accept" or not isinstance(content, dict):
        return None
    approve, note = content.get("approve"), content.get("note", "")
    if not isinstance(approve, bool) or not isinstance(note, str):
        return None
    return ApprovalIn(approve=approve, note=note[:MAX_NOTE])
