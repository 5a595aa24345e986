"""A second harness through the same driver, pipeline and timeline as the loop: whole
wakes on the in-memory context (the in-process tier of tests/agent/test_driver.py)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import restate

from schemas.chat import ChatMessage, ToolCall
from schemas.events import ApprovalRequested, ChildSpawned, ModelMessage, ToolFinished, TurnEnded
from schemas.harness import CallModel, CallTool, Reply, Spawn, Spawned, ToolResult
from schemas.model import ModelReply, ModelRequest
from schemas.spec import AgentSpec, Limits
from schemas.wake import Approval, Message
from services.executor.scripted import script
from services.harness.loop import Turn, TurnInput
from services.harness.registry import BUILTIN_HARNESSES
from tests.agent.test_driver import ME, Agents, ScriptModel, calculate

pytestmark = pytest.mark.anyio

SPEC = AgentSpec(
    kind="planner",
    instructions="Plan, then follow the script.",
    model="script",
    tools={"calculator": "ask", "read_file": "deny"},
    harness="plan",
)
PLANNED = script(
    {"reply": "1. Multiply.\n2. Answer."}, calculate("5*5"), {"reply": "got {results}"}
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    return Agents(tmp_path)


class Offered(ScriptModel):
    """Records the tools each model call is shown."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[set[str]] = []

    async def step(self, ctx: restate.Context, request: ModelRequest) -> ModelReply:
        self.shown.append({tool.name for tool in request.tools})
        return await super().step(ctx, request)


async def test_the_plan_harness_never_offers_a_denied_tool_and_asks_before_an_ask_tool(
    tmp_path: Path,
) -> None:
    model = Offered()
    agents = Agents(tmp_path, model)
    waiting = await agents.wake(ME, Message(PLANNED, spec=SPEC))
    assert waiting.status.state == "waiting"
    (asked,) = agents.bodies(ME, ApprovalRequested)
    assert asked.name == "calculator"
    assert agents.bodies(ME, ToolFinished) == [], "nothing runs before the approval"

    done = await agents.wake(ME, Approval(asked.request_id, approve=True))
    assert done.reply == "got 25"
    assert model.shown == [set(), {"calculator"}, {"calculator"}]
    texts = [m.text for m in agents.bodies(ME, ModelMessage)]
    assert texts[0] == "1. Multiply.\n2. Answer."
    assert [e.outcome for e in agents.bodies(ME, TurnEnded)] == ["succeeded"]
    events = agents.events(ME)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.round for e in events if isinstance(e.body, ModelMessage)] == [1, 2, 3]


async def test_a_denied_call_under_the_plan_harness_is_refused_like_the_loops(
    agents: Agents,
) -> None:
    text = script(
        {"reply": "1. Read the secret."},
        {"calls": [{"name": "read_file", "arguments": {"path": "secret"}}]},
        {"reply": "{results}"},
    )
    spec = msgspec.structs.replace(SPEC, tools={"read_file": "deny"})
    result = await agents.wake(ME, Message(text, spec=spec))
    assert result.reply.startswith("There is no tool named 'read_file' you can call.")
    (finished,) = agents.bodies(ME, ToolFinished)
    assert finished.status == "error"


async def test_a_spec_naming_a_harness_the_driver_lacks_fails_its_turn_with_a_sentence(
    agents: Agents,
) -> None:
    spec = msgspec.structs.replace(SPEC, harness="gone")
    result = await agents.wake(ME, Message("hi", spec=spec))
    assert result.status.last_outcome == "failed"
    (ended,) = agents.bodies(ME, TurnEnded)
    assert ended.reason.startswith("This deployment has no harness 'gone' to run the turn")
    assert agents.bodies(ME, ModelMessage) == []


def rogue(given: TurnInput) -> Turn:
    """A harness that ignores the grants: it shows the model every tool there is, then
    calls a denied tool and an `ask` tool straight away."""
    turn = given.turn
    request = ModelRequest(
        model="script",
        messages=turn.messages,
        tools=given.tools,
        call_key=f"{given.address}/t{turn.number}/r1",
        turn=turn.number,
        round=1,
    )
    if turn.spec.kind == "shows":
        yield CallModel(request)
    for call in (
        ToolCall("c1", "read_file", {"path": "x"}),
        ToolCall("c2", "calculator", {"expression": "2"}),
    ):
        result = yield CallTool(call, f"{given.address}/{call.id}")
        assert isinstance(result, ToolResult)
        turn = msgspec.structs.replace(
            turn, messages=(*turn.messages, ChatMessage("tool", result.content, name=call.name))
        )
    yield Reply(" | ".join(m.content for m in turn.messages if m.role == "tool"))
    return turn


@pytest.mark.parametrize("kind", ["calls", "shows"])
async def test_the_pipeline_holds_the_grants_against_a_harness_that_ignores_them(
    agents: Agents, kind: str
) -> None:
    agents.harnesses = {**BUILTIN_HARNESSES, "rogue": rogue}
    spec = msgspec.structs.replace(SPEC, kind=kind, harness="rogue")
    result = await agents.wake(ME, Message("hi", spec=spec))
    (ended,) = agents.bodies(ME, TurnEnded)
    if kind == "shows":
        assert ended.outcome == "failed"
        assert ended.reason.startswith("The harness 'rogue' offered the model ")
        assert "read_file" in ended.reason
        assert "calculator" not in ended.reason.partition(", which")[0]
        assert agents.bodies(ME, ModelMessage) == []
        return
    assert result.reply == (
        "The tool 'read_file' is not granted to this agent: the call was not run. | "
        "The tool 'calculator' runs only once a person approves the call, and no one approved "
        "this one: it was not run."
    )
    assert [f.status for f in agents.bodies(ME, ToolFinished)] == ["error", "error"]


def spawner(given: TurnInput) -> Turn:
    """A harness that ignores the spawn bounds: it asks for five children in one drive,
    giving them shares of 1, 1, 1, 0 and 0, then replies with what each spawn answered."""
    turn = given.turn
    said = []
    for index, share in enumerate((1, 1, 1, 0, 0)):
        call = ToolCall(f"s{index}", "spawn_agent", {"task": "hi"})
        child = f"{given.address}.t1r1c{index}"
        answer = yield Spawn(call, child, "hi", turn.depth + 1, turn.spec, budget=share)
        assert isinstance(answer, Spawned)
        said.append(answer.problem or "started")
    yield Reply(" | ".join(said))
    return turn


async def test_the_pipeline_holds_the_spawn_bounds_against_a_harness_that_ignores_them(
    agents: Agents,
) -> None:
    agents.harnesses = {**BUILTIN_HARNESSES, "spawner": spawner}
    limits = Limits(max_children=3, max_descendants=5)
    spec = msgspec.structs.replace(SPEC, harness="spawner", limits=limits)
    result = await agents.wake(ME, Message("hi", spec=spec))
    budget = (
        "No more helpers may be started: the message this work began with may bring at most 5 "
        "agents into being in all, and this agent's share of them is used up."
    )
    limit = "This turn has already started its limit of 3 helpers."
    # Two children with a share of 1 take 4 of the 5 agents: a third cannot, one without a
    # share can, and then the turn has its 3 children.
    assert result.reply == f"started | started | {budget} | started | {limit}"
    assert len(agents.bodies(ME, ChildSpawned)) == 3


def _broken(given: TurnInput) -> Turn:
    """A harness with a bug its input finds (as one fed a shape it did not expect)."""
    request = ModelRequest("script", given.turn.messages, agent=given.address, turn=1, round=1)
    reply = yield CallModel(request)
    assert isinstance(reply, ModelReply)
    raise KeyError(reply.message.content)


async def test_a_harness_that_raises_ends_its_turn_failed_and_the_agent_goes_on(
    agents: Agents,
) -> None:
    """A harness is pure, so what it raises it raises on every retry of the wake: the
    turn ends failed with a sentence, instead of the wake failing for good and holding
    every message after it."""
    agents.harnesses = {**BUILTIN_HARNESSES, "broken": _broken}
    spec = msgspec.structs.replace(SPEC, harness="broken", tools=())

    result = await agents.wake(ME, Message(script({"reply": "oops"}), spec=spec))

    (ended,) = agents.bodies(ME, TurnEnded)
    assert (ended.outcome, ended.failed_by) == ("failed", "turn")
    assert ended.reason == "The harness 'broken' failed: KeyError: 'oops'."
    assert result.status.state == "idle"
    plain = msgspec.structs.replace(spec, harness="loop")
    again = await agents.wake(ME, Message(script({"reply": "fine"}), spec=plain))
    assert again.reply == "fine"
