"""The memory layer, pure: after the earlier turns' messages and before the turn's own,
outside both fingerprints, each record once and none the window shows already."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import msgspec

from schemas.context import ContextState, FoldBlock
from schemas.harness import CallModel
from schemas.memory import MemoryRecord, MemoryScope
from services.executor.scripted import follow_directives
from services.harness.context import MEMORIES_HEADER
from services.harness.inprocess import run_in_process
from tests.harness.test_context import given

SCOPE = MemoryScope("acme", "tenant")
AT = datetime(2026, 12, 1, tzinfo=UTC)
FOLDED = ContextState(segments=5, folded=3, folds=1, blocks=(FoldBlock(1, 3, "Earlier."),))


def note(id_: str, text: str) -> MemoryRecord:
    return MemoryRecord(id_, SCOPE, "semantic", text, AT)


def first_call(memories: tuple[MemoryRecord, ...], text: str = "now") -> CallModel:
    base = given(5, FOLDED, text=text)
    turn = msgspec.structs.replace(base.turn, memories=memories)
    recording = run_in_process(replace(base, turn=turn), follow_directives)
    return next(c for c in recording.commands if isinstance(c, CallModel))


def test_memories_sit_before_the_turns_message_and_change_nothing_before_them() -> None:
    plain = first_call(())
    one = first_call((note("mem1", "The office closes at six."),))
    other = first_call((note("mem2", "Tea is in the kitchen."),))
    assert plain.memories == ()
    assert (one.memories, other.memories) == (("mem1",), ("mem2",))
    assert {c.fingerprint for c in (plain, one, other)} == {plain.fingerprint}
    assert {c.folds_fingerprint for c in (plain, one, other)} == {plain.folds_fingerprint}
    messages, without = one.request.messages, plain.request.messages
    assert messages[1].content.startswith("Summaries of earlier turns")
    layer = next(i for i, m in enumerate(messages) if m.content.startswith(MEMORIES_HEADER))
    assert messages[layer].role == "system"
    assert messages[layer].content == f"{MEMORIES_HEADER}\n- The office closes at six."
    assert (messages[layer + 1].role, messages[layer + 1].content) == ("user", "now")
    assert messages[:layer] == without[:layer], "the prompt before the layer, as without it"
    assert messages[layer + 1 :] == without[layer:]
    assert len(without) > 3, "earlier turns' messages come before the layer"


def test_a_memory_is_admitted_once_and_not_when_the_window_shows_it() -> None:
    twice = first_call(
        (note("mem1", "Tea is  in the kitchen."), note("mem2", "Tea is in the kitchen."))
    )
    assert twice.memories == ("mem1",)
    shown = first_call((note("mem3", "Tea is in the kitchen."),), text="Tea is in the kitchen.")
    assert shown.memories == ()
    assert all(not m.content.startswith(MEMORIES_HEADER) for m in shown.request.messages)
