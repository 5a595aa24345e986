"""A stop that names its turn: it stops that turn and no other, so a stop meant for a turn
that just ended never reaches the turn queued behind it. Pure, without Restate."""

from __future__ import annotations

import msgspec
import pytest

from schemas.chat import ChatMessage, ToolCall
from schemas.events import StopRefused, TurnEnded
from schemas.harness import AwaitingApproval, PendingApproval, TurnState
from schemas.spec import AgentSpec
from schemas.state import AgentRecord
from schemas.wake import Stop
from services.agent.machine import NOT_THAT_TURN, react, stops
from tests.agent.test_machine import bodies

ME = "acme.bot"
SPEC = AgentSpec(kind="helper", instructions="", model="script")
WAITING = AwaitingApproval(PendingApproval("t2r1-call_0", ToolCall("call_0", "calculator")))
TURN_2 = TurnState(2, SPEC, (ChatMessage(role="user", content="hi"),), round=1, phase=WAITING)
RECORD = AgentRecord(turns=2, spec=SPEC, turn=TURN_2)


@pytest.mark.parametrize(
    ("named", "running", "applies"),
    [(0, 2, True), (2, 2, True), (1, 2, False), (3, 2, False), (1, 0, True)],
)
def test_a_stop_is_for_the_turn_it_names_or_for_whichever_runs(
    named: int, running: int, applies: bool
) -> None:
    assert stops(Stop(turn=named), running) is applies


@pytest.mark.parametrize("named", [0, 2])
def test_a_stop_for_the_turn_in_progress_ends_it(named: int) -> None:
    reaction = react(ME, RECORD, Stop(turn=named))
    assert [b.outcome for b in bodies(reaction) if isinstance(b, TurnEnded)] == ["stopped"]
    assert reaction.record.turn is None


def test_a_stop_for_an_earlier_turn_changes_nothing_and_says_so() -> None:
    reaction = react(ME, RECORD, Stop(turn=1))
    sentence = NOT_THAT_TURN.format(turn=1)
    assert bodies(reaction) == [StopRefused("other_turn", sentence)]
    assert reaction.note == sentence
    assert reaction.record == RECORD


def test_an_old_stop_without_a_turn_decodes_as_one_for_whichever_is_in_progress() -> None:
    assert msgspec.json.decode(b'{"type": "stop", "by": "ops"}', type=Stop) == Stop("ops")
