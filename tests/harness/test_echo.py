"""The tools' voice, pure: a reply that only repeats a read-back is not the answer, and
`recall` is callable only when it can help."""

from __future__ import annotations

from dataclasses import replace

import msgspec

from schemas.chat import ChatMessage, ToolCall
from schemas.context import ContextState, FoldBlock
from schemas.harness import CallModel, CallTool, Command, Fail, Reply, ToolResult
from schemas.model import ModelReply, ModelRequest
from services.executor.scripted import follow_directives, script
from services.harness.echo import NUDGE, repeats
from services.harness.inprocess import Model, run_in_process
from services.harness.recall import RecallAnswer, Recalled, RecalledTurn, refers_back
from tests.harness.test_context import given

FOLDED = ContextState(segments=5, folded=3, folds=1, blocks=(FoldBlock(1, 3, "Earlier."),))
STORY = "Here is a story about a lighthouse keeper and the storm that broke the lamp."
READ_BACK = msgspec.json.encode(
    RecallAnswer((RecalledTurn(2, (Recalled(0, "user", STORY, length=len(STORY)),)),))
).decode()


def test_a_reply_that_copies_a_read_back_repeats_it_and_an_answer_does_not() -> None:
    assert repeats(STORY, [READ_BACK])
    assert repeats("  here is a STORY about a lighthouse keeper and the storm that ", [READ_BACK])
    assert repeats('{"turns": [{"turn": 2}]}', [])
    assert not repeats("You told me about a lighthouse keeper and a storm, I think.", [READ_BACK])
    assert not repeats("A lighthouse keeper.", [READ_BACK])  # too short to be a copy
    assert not repeats(STORY, [])


def test_recall_helps_only_when_the_message_points_back() -> None:
    assert refers_back("What was the first story I told you about?")
    assert refers_back("Do you remember my name?")
    assert not refers_back("Why is the sky blue?")


def model_calls(commands: list[Command]) -> list[ModelRequest]:
    return [c.request for c in commands if isinstance(c, CallModel)]


def test_recall_is_shown_but_withheld_for_a_message_that_does_not_point_back() -> None:
    recording = run_in_process(given(5, FOLDED, text="Why is the sky blue?"), follow_directives)
    (request,) = model_calls(recording.commands)
    assert [t.name for t in request.tools] == ["recall"]
    assert request.withheld == ("recall",)
    asked = run_in_process(given(5, FOLDED, text="What did I say earlier?"), follow_directives)
    assert model_calls(asked.commands)[0].withheld == ()
    # The same prefix either way: withholding keeps the prompt cache.
    both = (*recording.commands, *asked.commands)
    assert len({c.fingerprint for c in both if isinstance(c, CallModel)}) == 1


def copier_then(answer: str | None) -> Model:
    """A model that reads turn 6 back, repeats what it read, and once nudged answers
    `answer` (or repeats again when None)."""

    def model(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if last.role == "user":
            call = ToolCall("call_0", "recall", {"turn": 6})
            return ModelReply(ChatMessage(role="assistant", content="", tool_calls=(call,)))
        if last.name == NUDGE and answer is not None:
            return ModelReply(ChatMessage(role="assistant", content=answer))
        read = next(m for m in reversed(request.messages) if m.role == "tool")
        recalled = msgspec.json.decode(read.content, type=RecallAnswer)
        return ModelReply(
            ChatMessage(role="assistant", content=recalled.turns[0].messages[0].content)
        )

    return model


LONG = "Earlier I told you a long story about a lighthouse keeper and the storm that broke it."


def test_a_reply_that_repeats_a_read_back_gets_one_more_round_with_no_tool_to_call() -> None:
    recording = run_in_process(given(5, FOLDED, text=LONG), copier_then("It was a storm."))
    requests = model_calls(recording.commands)
    assert len(requests) == 3
    assert requests[0].withheld == ()
    nudged = requests[2]
    assert nudged.messages[-1].name == NUDGE
    assert nudged.messages[-1].role == "system"
    assert nudged.callable_tools() == ()
    # The copy is not shown again: the nudge takes its place.
    assert [m.role for m in nudged.messages[-3:]] == ["assistant", "tool", "system"]
    assert recording.commands[-1] == Reply("It was a storm.")
    assert recording.final is not None
    assert recording.final.messages[-1].content == "It was a storm."


def test_a_model_that_repeats_again_after_the_nudge_fails_its_turn_with_a_sentence() -> None:
    recording = run_in_process(given(5, FOLDED, text=LONG), copier_then(None))
    assert not any(isinstance(c, Reply) for c in recording.commands)
    last = recording.commands[-1]
    assert isinstance(last, Fail)
    assert "repeated what a tool read back" in last.reason


def long_result(command: CallTool) -> ToolResult:
    return ToolResult(command.call.id, command.call.name, "ok", STORY)


def test_a_reply_that_is_another_tools_result_is_the_answer() -> None:
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"reply": "{results}"},
    )
    base = given(1, text=text)
    spec = msgspec.structs.replace(base.turn.spec, tools=("calculator",))
    turn = msgspec.structs.replace(base.turn, spec=spec)
    recording = run_in_process(replace(base, turn=turn), follow_directives, long_result)
    assert recording.commands[-1] == Reply(STORY)
