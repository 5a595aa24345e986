"""The round's bookkeeping, pure: the wake's clock, a turn's running time, usage and the
daily ledger, the history's marks after a fold."""

from __future__ import annotations

import msgspec

from schemas.chat import ChatMessage, ToolCall
from schemas.context import ContextState, FoldBlock
from schemas.events import ModelFallback, ModelMessage
from schemas.harness import CallModel, RecordFold, TurnState
from schemas.model import Fallback, ModelReply, ModelRequest, Usage
from schemas.spec import AgentSpec
from schemas.state import Ledger
from services.agent.books import Books, Clock, model_events

T = 1_764_460_800.0  # 2025-11-30, UTC
SPEC = AgentSpec(kind="k", instructions="", model="script")
TURN = TurnState(1, SPEC, (ChatMessage(role="user", content="hi"),), active_seconds=2.0)
REQUEST = ModelRequest(model="script", messages=(), agent="acme.a", turn=1, round=1)


def reply(usage: Usage, started: float, finished: float) -> ModelReply:
    message = ChatMessage(role="assistant", content="", tool_calls=(ToolCall("c", "x", {}),))
    return ModelReply(message, usage, started=started, finished=finished)


def test_the_clock_keeps_the_earliest_and_latest_times_and_ignores_missing_ones() -> None:
    clock = Clock().saw(T + 5).saw(T + 1, 0).saw(0)
    assert clock == Clock(T + 1, T + 5)
    assert Clock().saw(0) == Clock()


def test_running_time_counts_earlier_wakes_and_this_drive_since_it_began() -> None:
    books = Books(TURN, Ledger(), ContextState(), since=T + 10)
    assert books.active(Clock(T, T + 13)) == 2.0 + 3
    assert books.spent(Clock(T, T + 13)).active_seconds == 5.0
    assert Books(TURN, Ledger(), ContextState()).active(Clock(T, T + 4)) == 2.0 + 4
    assert books.active(Clock()) == 2.0, "no time seen: nothing added"


def test_a_reply_adds_its_usage_to_the_turn_and_to_the_day_it_finished() -> None:
    books = Books(TURN, Ledger("2025-11-29", 500, reserved=90), ContextState())
    after = books.replied(reply(Usage(10, 5, 3), T, T + 1))
    assert after.turn.usage == Usage(10, 5, 3)
    assert after.ledger == Ledger("2025-11-30", 15, reserved=0), "a new day starts at zero"
    again = after.replied(reply(Usage(1, 1), T + 2, T + 3))
    assert (again.turn.usage, again.ledger.day_tokens) == (Usage(11, 6, 3), 17)
    assert books.turn.usage == Usage(), "the books are values: the old one is unchanged"


def test_a_fold_takes_the_new_marks_but_keeps_the_window_and_the_last_count() -> None:
    seen = ContextState(window=2048, prompt_tokens=900, prompt_chars=2700)
    block = FoldBlock(first_turn=1, last_turn=3, summary="s")
    marks = ContextState(segments=4, folded=3, folds=1, blocks=(block,))
    command = RecordFold(block, marks, 900, 300, "script")
    books, event = Books(TURN, Ledger(), seen).folded(command)
    assert books.context == msgspec.structs.replace(
        marks, window=2048, prompt_tokens=900, prompt_chars=2700
    )
    assert (event.first_turn, event.last_turn, event.extractive) == (1, 3, False)


def test_a_model_step_puts_its_fallbacks_then_its_message_on_the_timeline() -> None:
    command = CallModel(REQUEST, prompt_chars=30, fingerprint="f", folds_fingerprint="g")
    answered = msgspec.structs.replace(
        reply(Usage(1, 1), T, T + 1), model="", fallbacks=(Fallback("big", "script", "down"),)
    )
    fallback, message = model_events(command, answered)
    assert fallback == ModelFallback("big", "script", "down")
    assert isinstance(message, ModelMessage)
    assert (message.model, message.fingerprint, message.folds_fingerprint) == ("script", "f", "g")
