"""What failed, on a failed turn's `turn_ended`, driven in process: a turn that uses its
rounds failed within its own limits (`turn`); one whose model step could not run failed by
a step (`step`); a stopped turn names neither."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import restate

from schemas.events import TurnEnded
from schemas.model import ModelReply, ModelRequest
from schemas.spec import Limits
from schemas.wake import Message
from services.executor.scripted import script
from tests.agent.test_driver import ME, SPEC, Agents, ScriptModel, calculate

pytestmark = pytest.mark.anyio


class BrokenAt(ScriptModel):
    """The script model, whose step at round `at` fails as a model that cannot be reached."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    async def step(self, ctx: restate.Context, request: ModelRequest) -> ModelReply:
        if request.round == self.at:
            raise restate.TerminalError("the model could not be reached", status_code=500)
        return await super().step(ctx, request)


def ending(agents: Agents) -> TurnEnded:
    (ended,) = agents.bodies(ME, TurnEnded)
    assert isinstance(ended, TurnEnded)
    return ended


async def test_a_turn_that_uses_its_rounds_failed_within_its_limits(tmp_path: Path) -> None:
    agents = Agents(tmp_path)
    spec = msgspec.structs.replace(SPEC, limits=Limits(max_rounds=1))
    await agents.wake(ME, Message(script(calculate("1+1"), {"reply": "never"}), spec=spec))
    assert (ending(agents).outcome, ending(agents).failed_by) == ("failed", "turn")


async def test_a_turn_whose_model_step_cannot_run_failed_by_a_step(tmp_path: Path) -> None:
    agents = Agents(tmp_path, BrokenAt(2))
    await agents.wake(ME, Message(script(calculate("1+1"), {"reply": "never"}), spec=SPEC))
    ended = ending(agents)
    assert (ended.outcome, ended.failed_by) == ("failed", "step")
    assert ended.reason == "The model step failed: the model could not be reached"


async def test_a_stopped_turn_names_nothing_failed(tmp_path: Path) -> None:
    agents = Agents(tmp_path, ScriptModel(stop_at=1))
    await agents.wake(ME, Message(script({"reply": "never"}), spec=SPEC))
    assert (ending(agents).outcome, ending(agents).failed_by) == ("stopped", "")
