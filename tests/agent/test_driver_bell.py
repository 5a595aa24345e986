"""A running turn hears its bell at a round boundary, in process: a steered message is
read in the next round, a pause holds the turn after its round. The bell is rung from
inside the round's model step, as the shared `arrived` and `pause` handlers ring it while
the wake runs."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import msgspec
import pytest
import restate

from schemas.events import (
    AgentPaused,
    MessageQueued,
    MessageSteered,
    ModelMessage,
    ToolFinished,
    TurnEnded,
)
from schemas.model import ModelReply, ModelRequest
from schemas.state import Bell, RunningWake
from schemas.wake import Message, Pause, Resume
from services.agent.inline import InlineContext
from services.agent.store import RUNNING
from services.executor.scripted import script
from tests.agent.test_driver import ME, SPEC, Agents, ScriptModel, calculate

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Ringing(ScriptModel):
    """Rings the running turn's bell (or its queue bell) with `bell` while round `at`'s
    model step runs."""

    def __init__(self, at: int, bell: Bell, *, queue: bool = False) -> None:
        super().__init__()
        self.at, self.bell, self.queue = at, bell, queue
        self.bells: list[str] = []
        """The bell each round's model step found named in `running`."""

    async def step(self, ctx: restate.Context, request: ModelRequest) -> ModelReply:
        inline = cast(InlineContext, ctx)
        running = msgspec.json.decode(inline.state[RUNNING], type=RunningWake)
        self.bells.append(running.bell)
        if request.round == self.at:
            name = running.queue_bell if self.queue else running.bell
            inline.resolve(name, msgspec.json.encode(self.bell))
        return await super().step(ctx, request)


SLOW = script(calculate("6*7"), {"reply": "never read"})


async def test_a_steered_message_is_read_in_the_next_round_and_the_turn_ends_once(
    tmp_path: Path,
) -> None:
    steer = Message("and say hi", id="m-steer", while_busy="steer")
    model = Ringing(at=1, bell=Bell(message=steer))
    agents = Agents(tmp_path, model)
    result = await agents.wake(ME, Message(SLOW, spec=SPEC))

    assert result.reply == "You said: and say hi"
    assert [b.message_id for b in agents.bodies(ME, MessageSteered)] == ["m-steer"]
    assert [f.content for f in agents.bodies(ME, ToolFinished)] == ["42"]
    assert len(agents.bodies(ME, ModelMessage)) == 2
    assert model.bells[0] != model.bells[1], "a bell that rang is replaced"
    copy = await agents.wake(ME, steer)
    assert copy.status.turn == 1, "the message's own wake starts no turn"
    assert len(agents.bodies(ME, TurnEnded)) == 1


async def test_a_steer_during_the_last_round_gets_one_more_round(tmp_path: Path) -> None:
    steer = Message("one more thing", id="m-late", while_busy="steer")
    agents = Agents(tmp_path, Ringing(at=1, bell=Bell(message=steer)))
    result = await agents.wake(ME, Message(script({"reply": "done"}), spec=SPEC))
    assert result.reply == "You said: one more thing"
    assert len(agents.bodies(ME, ModelMessage)) == 2


async def test_a_pause_holds_the_turn_after_its_round_until_resume(tmp_path: Path) -> None:
    agents = Agents(tmp_path, Ringing(at=1, bell=Bell(pause=Pause(by="ops"))))
    held = await agents.wake(
        ME, Message(script(calculate("6*7"), {"reply": "{results}"}), spec=SPEC)
    )

    assert held.status.state == "paused"
    assert [p.by for p in agents.bodies(ME, AgentPaused)] == ["ops"]
    assert [f.content for f in agents.bodies(ME, ToolFinished)] == ["42"]
    assert len(agents.bodies(ME, ModelMessage)) == 1
    again = await agents.wake(ME, Pause(by="ops"))
    assert len(agents.bodies(ME, AgentPaused)) == 1, again.note
    resumed = await agents.wake(ME, Resume())
    assert (resumed.reply, resumed.status.state) == ("42", "idle")


async def test_a_message_queued_behind_a_running_turn_is_recorded_by_it(tmp_path: Path) -> None:
    later = Message("later", id="m-later", while_busy="queue")
    agents = Agents(tmp_path, Ringing(at=1, bell=Bell(message=later), queue=True))
    result = await agents.wake(ME, Message(SLOW, spec=SPEC))
    assert result.reply == "never read", "the turn goes on as it would have"
    queued = [
        (e.turn, e.round, e.body) for e in agents.events(ME) if isinstance(e.body, MessageQueued)
    ]
    assert queued == [(1, 1, MessageQueued("later", "m-later"))]
    ran = await agents.wake(ME, later)
    assert ran.reply == "You said: later"
