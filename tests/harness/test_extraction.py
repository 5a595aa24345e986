"""The extraction step's request and the facts its reply gives, pure."""

from __future__ import annotations

from schemas.chat import ChatMessage, ToolCall
from schemas.harness import TurnState
from schemas.model import ModelReply, ModelRequest
from schemas.spec import AgentSpec
from services.executor.scripted import follow_directives, script
from services.harness.extraction import MAX_FACTS, extraction_request, facts

SPEC = AgentSpec(kind="noter", instructions="Note.", model="script", fallback=("other",))


def said(text: str, finish: str = "stop") -> ModelReply:
    return ModelReply(ChatMessage(role="assistant", content=text), finish_reason=finish)  # type: ignore[arg-type]


def test_a_reply_lists_its_facts_one_a_line_and_none_for_none() -> None:
    listed = "- U's cat is Miso.\n2) U lives in Lyon\n\n* U's cat is Miso.\n"
    assert facts(said(listed)) == ("U's cat is Miso.", "U lives in Lyon")
    assert facts(said("NONE")) == ()
    assert facts(said("None.")) == ()
    assert facts(said("a fact", "cancelled")) == ()
    many = "\n".join(f"fact {n}" for n in range(9))
    assert len(facts(said(many))) == MAX_FACTS
    call = ToolCall("c", "remember", {"text": "x"})
    calling = ModelReply(ChatMessage(role="assistant", content="x", tool_calls=(call,)))
    assert facts(calling) == ()


def test_the_request_shows_the_turn_and_the_script_answers_with_its_next_line() -> None:
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"reply": "It is 42"},
        {"reply": "U asked for 6*7"},
    )
    call = ToolCall("call_0", "calculator", {"expression": "6*7"})
    messages = (
        ChatMessage(role="user", content=text),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content="42", tool_call_id="call_0", name="calculator"),
        ChatMessage(role="assistant", content="It is 42"),
    )
    turn = TurnState(3, SPEC, messages, round=2, user="U")

    request = extraction_request("acme.u-1", turn)

    assert isinstance(request, ModelRequest)
    assert (request.model, request.fallback, request.call_key) == (
        "script",
        ("other",),
        "acme.u-1/t3/extract",
    )
    assert [m.role for m in request.messages] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "system",
    ]
    assert "[calculator returned: 42]" in request.messages[2].content
    assert not any(m.tool_calls for m in request.messages)
    assert facts(follow_directives(request)) == ("U asked for 6*7",)
