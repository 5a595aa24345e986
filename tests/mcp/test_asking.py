"""A server's questions in both protocol generations, without a server: the stateless
revision's input-required result as questions and the answers as input responses; the
session-based revisions' mid-call elicitation answered at once; a tool result without a
`resultType` marked complete."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from schemas.questions import InputAnswer, InputAsked, Question
from services.mcp.asking import MidCall, asked_of, responses_of
from services.mcp.completing import completed

FORM = {"type": "object", "properties": {"n": {"type": "integer"}}}


def _form(message: str, schema: dict[str, Any]) -> mcp_types.ElicitRequest:
    params = mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)
    return mcp_types.ElicitRequest(params=params)


def test_an_input_required_result_is_questions_with_the_request_state() -> None:
    page = mcp_types.ElicitRequestURLParams(
        message="Sign in", url="https://example.test/in", elicitation_id="e1"
    )
    result = mcp_types.InputRequiredResult(
        input_requests={"n": _form("How many?", FORM), "in": mcp_types.ElicitRequest(params=page)},
        request_state="opaque",
    )
    assert asked_of(result, 2) == InputAsked(
        {
            "n": Question("How many?", FORM),
            "in": Question("Sign in", url="https://example.test/in"),
        },
        "opaque",
        2,
    )


def test_a_request_no_person_can_answer_is_a_sentence() -> None:
    result = mcp_types.InputRequiredResult(
        input_requests={"roots": mcp_types.ListRootsRequest()}, request_state=None
    )
    assert asked_of(result, 1) == "asked for roots/list, which teaspill does not provide"


def test_questions_too_big_to_keep_are_a_sentence() -> None:
    result = mcp_types.InputRequiredResult(
        input_requests={"n": _form("How many?", FORM)}, request_state="x" * 70_000
    )
    assert asked_of(result, 1) == (
        "asked for input with questions and request state of 70,136 bytes, more than the "
        "65,536 a waiting call may keep"
    )


def test_the_answer_is_one_response_per_question() -> None:
    asked = InputAsked({"n": Question("How many?", FORM), "in": Question("Go", url="u")})
    accepted = responses_of(InputAnswer(asked, True, {"n": {"n": 2}}))
    assert accepted == {
        "n": mcp_types.ElicitResult(action="accept", content={"n": 2}),
        "in": mcp_types.ElicitResult(action="accept"),
    }
    declined = responses_of(InputAnswer(asked, False))
    assert declined == {key: mcp_types.ElicitResult(action="decline") for key in ("n", "in")}


def _ask(mid: MidCall, schema: dict[str, Any]) -> mcp_types.ElicitResult:
    params = mcp_types.ElicitRequestFormParams(message="Confirm?", requested_schema=schema)
    return anyio.run(mid, None, params)  # type: ignore[arg-type]


def test_mid_call_a_form_whose_fields_all_have_defaults_is_accepted_with_them() -> None:
    mid = MidCall("shop")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean", "default": True}}}
    assert _ask(mid, schema) == mcp_types.ElicitResult(action="accept", content={"ok": True})
    assert mid.notes == [
        "The MCP server shop asked for input during the call ('Confirm?'); every field had a "
        "default, so it was accepted with them."
    ]


def test_mid_call_any_other_question_is_declined_and_the_model_is_told_why() -> None:
    mid = MidCall("shop")
    assert _ask(mid, FORM).action == "decline"
    assert "a call cannot wait for a person, so it was declined" in mid.notes[0]


def _response(result: dict[str, Any]) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=3, result=result))


def test_a_tool_result_without_a_result_type_is_marked_complete() -> None:
    marked = completed(_response({"content": []}))
    assert isinstance(marked, SessionMessage)
    assert isinstance(marked.message, mcp_types.JSONRPCResponse)
    assert marked.message.result == {"content": [], "resultType": "complete"}


def test_other_results_pass_unchanged() -> None:
    results: list[dict[str, Any]] = [
        {"tools": []},
        {"content": [], "resultType": "task"},
        {"inputRequests": {}},
    ]
    for result in results:
        item = _response(result)
        assert completed(item) is item
