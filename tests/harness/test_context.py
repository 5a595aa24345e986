"""The context engine, pure: layers, fingerprints, folds, cuts and recall answers."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage, ToolCall
from schemas.context import ContextState, FoldBlock, Segment
from schemas.harness import (
    CallModel,
    Command,
    RecordFold,
    Reply,
    Result,
    Summarize,
    Summary,
    TurnState,
)
from schemas.model import ModelReply, ModelRequest
from schemas.spec import AgentSpec, Limits
from services.executor.scripted import follow_directives, script
from services.harness.context import (
    MIN_SHOWN,
    Budget,
    Current,
    Estimate,
    message_chars,
    tools_text,
)
from services.harness.folding import extractive
from services.harness.inprocess import Recording, run_in_process
from services.harness.loop import TurnInput, run_turn
from services.harness.recall import RECALL_LIMIT, RecallAnswer, answer, parse
from services.tools.builtin import CALCULATOR
from tests.harness.test_loop import kinds

LIMITS = Limits(context_window=1200, max_tokens=100)
SPEC = AgentSpec(kind="test", instructions="Be brief.", model="script", limits=LIMITS)
WORDS = " ".join(f"word{i}" for i in range(15))


def segment(turn: int) -> Segment:
    return Segment(
        turn,
        (
            ChatMessage(role="user", content=f"question {turn}: {WORDS}"),
            ChatMessage(role="assistant", content=f"answer {turn}: {WORDS}"),
        ),
    )


def given(turns: int, state: ContextState | None = None, text: str = "now") -> TurnInput:
    state = state or ContextState(segments=turns)
    recent = tuple(segment(n) for n in range(state.folded + 1, state.segments + 1))
    turn = TurnState(turns + 1, SPEC, (ChatMessage(role="user", content=text),))
    return TurnInput("acme.bot", turn, recent, (CALCULATOR.definition,), state)


def first(recording: Recording, kind: type[CallModel]) -> CallModel:
    return next(c for c in recording.commands if isinstance(c, kind))


def test_the_turns_messages_measured_as_they_are_added_are_measured_right() -> None:
    call = ToolCall("c1", "calculator", {"expression": "6*7"})
    asked = ChatMessage(role="user", content="What is 6*7?")
    calling = ChatMessage(role="assistant", content="", tool_calls=(call,))
    answered = ChatMessage(role="tool", content="42", tool_call_id="c1", name="calculator")
    replied = ChatMessage(role="assistant", content="It is 42, as the calculator says.")
    whole = (asked, calling, answered, replied)

    def measured(messages: tuple[ChatMessage, ...]) -> tuple[int, int]:
        return sum(map(message_chars, messages)), max(len(m.content) for m in messages)

    grown = Current()
    for count in range(1, len(whole) + 1):
        grown = grown.then(whole[:count])
        assert (grown.chars, grown.longest) == measured(whole[:count])
    other = (asked, ChatMessage(role="assistant", content="Forty-two."))
    replaced = grown.then(other)  # not a continuation: measured afresh
    assert replaced.messages == other
    assert (replaced.chars, replaced.longest) == measured(other)


def test_a_short_history_is_shown_verbatim_without_a_fold() -> None:
    recording = run_in_process(given(1), follow_directives)
    assert kinds(recording) == ["CallModel", "Reply"]
    request = first(recording, CallModel).request
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "user"]
    assert request.tools == ()  # nothing folded or cut: no recall shown


def test_a_long_history_folds_its_oldest_turns_into_one_block_before_the_call() -> None:
    recording = run_in_process(given(12), follow_directives)
    assert kinds(recording) == ["Summarize", "RecordFold", "CallModel", "Reply"]
    fold = recording.commands[1]
    assert isinstance(fold, RecordFold)
    assert fold.block.first_turn == 1
    assert fold.tokens_after < fold.tokens_before
    assert fold.model == "script"
    assert fold.context.folded == fold.block.last_turn
    request = first(recording, CallModel).request
    shown = "\n".join(m.content for m in request.messages)
    assert f"question {fold.block.last_turn}:" not in shown
    assert f"question {fold.block.last_turn + 1}:" in shown
    assert request.messages[1].role == "system"
    assert fold.block.summary in request.messages[1].content
    assert "recall" in [t.name for t in request.tools]
    budget, estimate = Budget.of(SPEC, ContextState()), Estimate(ContextState())
    assert fold.tokens_after <= budget.low + estimate.tokens(40)


def drive(turn_input: TurnInput, summary: Summary | None) -> list[Command]:
    """Run a turn, answering the summary step with `summary` (the model's when None)."""
    harness = run_turn(turn_input)
    commands: list[Command] = []
    result: Result | None = None
    try:
        command = next(harness)
        while True:
            commands.append(command)
            match command:
                case Summarize(request=request):
                    result = summary or Summary(follow_directives(request))
                case CallModel(request=request):
                    result = follow_directives(request)
                case _:
                    result = Summary()
            command = harness.send(result)
    except StopIteration:
        return commands


def test_a_failed_summary_step_folds_with_the_extractive_summary() -> None:
    commands = drive(given(12), Summary(problem="The summary step failed: boom"))
    fold = next(c for c in commands if isinstance(c, RecordFold))
    assert fold.model == ""
    assert fold.reason == "The summary step failed: boom"
    assert fold.block.summary.startswith("Turn 1: question 1: word0")
    assert commands[-1] == Reply("You said: now")


def test_an_empty_summary_is_not_usable() -> None:
    empty = ModelReply(ChatMessage(role="assistant", content="   "))
    commands = drive(given(12), Summary(empty))
    fold = next(c for c in commands if isinstance(c, RecordFold))
    assert fold.model == ""
    assert fold.reason == "The summary step wrote nothing usable."


def test_the_prefix_and_fold_fingerprints_hold_between_folds_and_requests_are_stable() -> None:
    state = ContextState(
        segments=6, folded=3, folds=1, blocks=(FoldBlock(1, 3, "Earlier: three questions."),)
    )
    earlier_state = msgspec.structs.replace(state, segments=5)
    one = first(run_in_process(given(5, earlier_state), follow_directives), CallModel)
    two = first(run_in_process(given(6, state), follow_directives), CallModel)
    assert (one.fingerprint, one.folds_fingerprint) == (two.fingerprint, two.folds_fingerprint)
    again = first(run_in_process(given(6, state), follow_directives), CallModel)
    assert msgspec.json.encode(again.request) == msgspec.json.encode(two.request)
    more = msgspec.structs.replace(
        state, blocks=(*state.blocks, FoldBlock(4, 5, "Then two more.")), folded=5, folds=2
    )
    three = first(run_in_process(given(6, more), follow_directives), CallModel)
    assert three.fingerprint == two.fingerprint
    assert three.folds_fingerprint != two.folds_fingerprint
    earlier, later = two.request.messages[1].content, three.request.messages[1].content
    assert later.startswith(earlier)  # a fold appends its block: the prefix is kept


def test_a_message_bigger_than_its_share_is_cut_with_a_marker_saying_how_to_read_on() -> None:
    big = "x" * 200_000
    recording = run_in_process(given(0, text=big), follow_directives)
    request = first(recording, CallModel).request
    shown = request.messages[-1].content
    assert len(shown) < 2_000
    assert "call recall with turn=1, message=0, offset=" in shown
    assert "recall" in [t.name for t in request.tools]


def test_recall_reads_the_current_turn_in_pages() -> None:
    big = "y" * (RECALL_LIMIT + 500)
    current = (ChatMessage(role="user", content=big),)
    call = ToolCall("call_0", "recall", {"turn": 1, "message": 0, "offset": 0})
    query = parse(call)
    assert not isinstance(query, str)
    page = msgspec.json.decode(answer(query, [(1, current)]), type=RecallAnswer)
    assert page.turns[0].messages[0].content == big[:RECALL_LIMIT]
    assert f"offset={RECALL_LIMIT}" in page.note
    rest_call = ToolCall("call_1", "recall", {"turn": 1, "message": 0, "offset": RECALL_LIMIT})
    rest = parse(rest_call)
    assert not isinstance(rest, str)
    tail = msgspec.json.decode(answer(rest, [(1, current)]), type=RecallAnswer)
    assert tail.turns[0].messages[0].content == big[RECALL_LIMIT:]
    assert tail.note == ""


def test_recall_arguments_are_checked() -> None:
    assert parse(ToolCall("c", "recall", {})) == (
        "recall needs `turn` (an integer turn number) or `query` (words to look for)."
    )
    assert "counts from 1" in str(parse(ToolCall("c", "recall", {"turn": 0})))


def test_the_extractive_summary_is_bounded_and_deterministic() -> None:
    segments = tuple(segment(n) for n in range(1, 40))
    one, two = extractive(segments, 500), extractive(segments, 500)
    assert one == two
    assert len(one) <= max(500, MIN_SHOWN)


def test_a_script_turn_still_works_with_a_summary_request_in_the_way() -> None:
    text = script({"reply": "done"})
    recording = run_in_process(given(12, text=text), follow_directives)
    assert recording.commands[-1] == Reply("done")


def test_the_summary_request_is_bounded_by_the_window() -> None:
    recording = run_in_process(given(12), follow_directives)
    summarize = recording.commands[0]
    assert isinstance(summarize, Summarize)
    request: ModelRequest = summarize.request
    assert request.tools == ()
    assert request.agent == ""  # no live text: a summary is not the agent's reply
    chars = sum(len(m.content) for m in request.messages)
    assert Estimate(ContextState()).tokens(chars) + request.max_tokens <= LIMITS.context_window


def test_recall_is_withheld_once_a_turn_called_it_twice_and_the_prefix_stays() -> None:
    # The script is the user's message: its query words point back at earlier turns.
    call = {"calls": [{"name": "recall", "arguments": {"query": "what I said earlier"}}]}
    text = script(call, call, {"reply": "done"})
    folded = ContextState(segments=5, folded=3, folds=1, blocks=(FoldBlock(1, 3, "Earlier."),))
    recording = run_in_process(given(5, folded, text=text), follow_directives)
    calls = [c for c in recording.commands if isinstance(c, CallModel)]
    assert [[t.name for t in c.request.tools] for c in calls] == [["recall"]] * 3
    assert [c.request.withheld for c in calls] == [(), (), ("recall",)]
    assert calls[2].request.callable_tools() == ()
    assert len({(c.fingerprint, c.folds_fingerprint) for c in calls}) == 1
    assert recording.commands[-1] == Reply("done")


def test_earlier_turns_recall_exchanges_are_not_shown_again_and_cuts_keep_their_index() -> None:
    read = ToolCall("call_0", "recall", {"turn": 1})
    big = "z" * 1_500
    earlier = Segment(
        4,
        (
            ChatMessage(role="user", content="what did I say first?"),
            ChatMessage(role="assistant", content="", tool_calls=(read,)),
            ChatMessage(role="tool", content='{"turns": []}', tool_call_id="call_0", name="recall"),
            ChatMessage(role="assistant", content=big),
        ),
    )
    state = ContextState(segments=4, folded=3, folds=1, blocks=(FoldBlock(1, 3, "Earlier."),))
    base = given(4, state)
    recording = run_in_process(
        TurnInput(base.address, base.turn, (earlier,), base.tools, state), follow_directives
    )
    shown = first(recording, CallModel).request.messages
    assert [m.role for m in shown] == ["system", "system", "user", "assistant", "user"]
    assert all(not m.tool_calls and m.name != "recall" for m in shown)
    assert "call recall with turn=4, message=3, offset=" in shown[3].content


def prompt_chars(request: ModelRequest) -> int:
    """Counted from the request itself, as the prompt's estimate must count it."""
    return sum(message_chars(m) for m in request.messages) + len(tools_text(request.tools))


def test_a_model_call_counts_the_characters_of_the_prompt_it_sends() -> None:
    shown = first(run_in_process(given(3), follow_directives), CallModel)
    cut = first(run_in_process(given(1, text="x" * 200_000), follow_directives), CallModel)
    assert shown.prompt_chars == prompt_chars(shown.request)
    assert cut.prompt_chars == prompt_chars(cut.request)
    assert cut.prompt_chars < 4_000
