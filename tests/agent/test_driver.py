"""The driver's in-process tier: whole wakes of real code (the driver, the machine, the
harness, the store, the timeline, the tool registry) on the in-memory context
(`services/agent/inline.py`), with the `script` model as a local step. No restate-server:
the one-way sends a wake makes are delivered by the test, as Restate would."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
import restate
from restate.serde import Serde

from schemas.events import (
    ApprovalRequested,
    ChildReported,
    ChildSpawned,
    Event,
    ModelMessage,
    ToolFinished,
    TurnEnded,
    TurnStarted,
    WakeResult,
)
from schemas.model import ModelReply, ModelRequest
from schemas.projection import EventBatch
from schemas.sandbox import WorkspaceSettings
from schemas.spec import AgentSpec
from schemas.tenant import SpecAnswer, SpecQuery, TokenLease, TokensGranted, TokensSettled
from schemas.wake import Approval, Message, Timer, Wake, WakeEnvelope
from services.agent.driver import Driver
from services.agent.inline import Call, InlineContext, Sent
from services.agent.pipeline import TenantQuotas
from services.agent.store import Reader
from services.contracts import COUNT_AGENT, LATEST_SPEC, LEASE_TOKENS, SETTLE_TOKENS, WAKE
from services.durable import CANCELLED, step_options
from services.effects.ledger import MemoryLedger
from services.executor.scripted import follow_directives, script
from services.harness.registry import BUILTIN_HARNESSES, Harness
from services.tools.registry import load_tools

pytestmark = pytest.mark.anyio
ME = "acme.driver.one"
SPEC = AgentSpec(
    kind="driver", instructions="Follow the script.", model="script", tools=("calculator",)
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def calculate(*expressions: str) -> dict[str, Any]:
    return {"calls": [{"name": "calculator", "arguments": {"expression": e}} for e in expressions]}


class ScriptModel:
    """The `script` model as a local journaled step; `stop_at` makes that round's step
    raise what Restate raises in an invocation cancelled by a stop."""

    def __init__(self, stop_at: int = 0) -> None:
        self.stop_at = stop_at
        self.clock = 1_764_460_800.0

    async def step(self, ctx: restate.Context, request: ModelRequest) -> ModelReply:
        if request.round == self.stop_at:
            raise restate.TerminalError("cancelled", status_code=CANCELLED)

        def generate() -> ModelReply:
            self.clock += 1
            reply = follow_directives(request)
            return msgspec.structs.replace(reply, started=self.clock, finished=self.clock + 0.5)

        return await ctx.run_typed(
            f"model script r{request.round}", generate, step_options(ModelReply)
        )


class Projection:
    def __init__(self) -> None:
        self.batches: list[EventBatch] = []

    def offer(self, batch: EventBatch) -> None:
        self.batches.append(batch)

    async def write(self, batch: EventBatch) -> None:
        self.batches.append(batch)

    def events(self, agent: str) -> list[Event]:
        """Each event once (the last write repeats what was offered), in seq order."""
        by_seq = {e.seq: e for b in self.batches for e in b.events if e.agent == agent}
        return [by_seq[seq] for seq in sorted(by_seq)]


class Recording(InlineContext):
    """Logs the calls a wake makes and the state it reads, as it makes them."""

    log: list[str]

    def generic_call(
        self, service: str, handler: str, arg: bytes, key: str | None = None
    ) -> asyncio.Future[bytes]:
        self.log.append(f"call {service}/{handler}")
        return super().generic_call(service, handler, arg, key)

    def get(
        self, name: str, serde: Serde[Any] | None = None, type_hint: type | None = None
    ) -> asyncio.Future[Any]:
        self.log.append(f"read {name}")
        return super().get(name, serde, type_hint)


class Agents:
    """Agents in this process: each one's object state, and the sends their wakes made
    that no one has delivered yet."""

    def __init__(self, home: Path, model: ScriptModel | None = None) -> None:
        self.tools = load_tools(home, (), MemoryLedger())
        self.model = model or ScriptModel()
        self.projection = Projection()
        self.states: dict[str, dict[str, bytes]] = {}
        self.outbox: list[Sent] = []
        self.published: dict[str, AgentSpec] = {}
        self.asked: list[str] = []
        """The kinds wakes asked the tenant for, in order."""
        self.log: list[str] = []
        """The calls wakes made and the state keys they read, in order."""
        self.quotas = TenantQuotas()
        self.lendable = 0
        """What the tenant has left to lend of the day, when `quotas` count tokens."""
        self.leases: list[TokenLease] = []
        self.harnesses: Mapping[str, Harness] = BUILTIN_HARNESSES
        self._wakes = 0

    async def lend(self, raw: bytes) -> bytes:
        """The tenant's `TenantUsage/lease`: what it has left, up to what is asked."""
        lease = msgspec.json.decode(raw, type=TokenLease)
        self.leases.append(lease)
        granted = min(lease.want, self.lendable)
        self.lendable -= granted
        return msgspec.json.encode(TokensGranted(lease.day, granted))

    async def latest(self, raw: bytes) -> bytes:
        """The tenant's answer to a wake that asks for the newest spec of a kind."""
        kind = msgspec.json.decode(raw, type=SpecQuery).kind
        self.asked.append(kind)
        return msgspec.json.encode(SpecAnswer(self.published.get(kind)))

    async def wake(self, address: str, wake: Wake) -> WakeResult:
        self._wakes += 1
        state = self.states.setdefault(address, {})
        calls: dict[tuple[str, str], Call] = {
            (LATEST_SPEC.service, LATEST_SPEC.name): self.latest,
            (LEASE_TOKENS.service, LEASE_TOKENS.name): self.lend,
        }
        inline = Recording(address, state, f"inv_{self._wakes}", calls)
        inline.log = self.log
        ctx = cast(restate.ObjectContext, inline)
        driver = Driver(
            ctx,
            address,
            self.tools,
            sink=self.projection,
            model=self.model,
            quotas=self.quotas,
            harnesses=self.harnesses,
        )
        try:
            return await driver.run(wake)
        finally:
            self.outbox.extend(inline.sent)

    async def deliver(self) -> list[WakeResult]:
        """Deliver every wake sent without a delay (not timers), until none is left."""
        results = []
        while due := [s for s in self.outbox if s.delay is None and s.service == WAKE.service]:
            sent = due[0]
            self.outbox.remove(sent)
            assert (sent.service, sent.handler) == (WAKE.service, WAKE.name)
            assert sent.key is not None
            wake = msgspec.json.decode(sent.arg, type=WakeEnvelope).wake
            results.append(await self.wake(sent.key, wake))
        return results

    def events(self, address: str) -> list[Event]:
        return self.projection.events(address)

    def bodies(self, address: str, kind: type) -> list[Any]:
        return [e.body for e in self.events(address) if isinstance(e.body, kind)]


@pytest.fixture
def agents(tmp_path: Path) -> Agents:
    return Agents(tmp_path)


async def test_a_turn_of_rounds_runs_its_tools_and_replies(agents: Agents) -> None:
    text = script(calculate("6*7"), calculate("1+1"), {"reply": "got {results}"})
    result = await agents.wake(ME, Message(text, spec=SPEC))
    assert result.reply == "got 42\n2"
    assert result.status.state == "idle"
    assert [f.content for f in agents.bodies(ME, ToolFinished)] == ["42", "2"]
    assert len(agents.bodies(ME, ModelMessage)) == 3
    ended = agents.bodies(ME, TurnEnded)
    assert [e.outcome for e in ended] == ["succeeded"]
    assert ended[0].usage.completion_tokens > 0
    events = agents.events(ME)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert result.status.last_seq == len(events)


async def test_a_message_naming_its_kind_runs_the_published_spec_asked_for_once(
    agents: Agents,
) -> None:
    """The wake asks for the spec as it starts, before the record is read, and uses that
    answer: the tenant is asked once a turn."""
    agents.published["helper"] = msgspec.structs.replace(SPEC, kind="helper", version=2)
    first = await agents.wake(ME, Message(script({"reply": "one"}), kind="helper"))
    assert (first.reply, agents.asked) == ("one", ["helper"])
    assert agents.log[:2] == ["call Tenant/spec", "read agent"]
    second = await agents.wake(ME, Message(script({"reply": "two"}), kind="helper"))
    assert (second.reply, agents.asked) == ("two", ["helper", "helper"])
    started = agents.bodies(ME, TurnStarted)
    assert [(b.spec_kind, b.spec_version) for b in started] == [("helper", 2), ("helper", 2)]


async def test_the_record_is_written_once_and_read_back_by_the_next_turn(agents: Agents) -> None:
    await agents.wake(ME, Message(script({"reply": "one"}), spec=SPEC))
    second = await agents.wake(ME, Message(script({"reply": "two"})))
    assert (second.reply, second.status.turn) == ("two", 2)
    stored = await Reader(
        cast(restate.ObjectContext, InlineContext(ME, agents.states[ME], "r"))
    ).stored()
    assert stored.record.turns == 2
    assert stored.recent is not None
    assert len(stored.recent.segments) == 2
    assert stored.finished == "inv_2"


async def test_a_stop_during_a_round_ends_the_turn_as_stopped(tmp_path: Path) -> None:
    agents = Agents(tmp_path, ScriptModel(stop_at=2))
    text = script(calculate("2*3"), calculate("3*3"), {"reply": "never"})
    result = await agents.wake(ME, Message(text, spec=SPEC))
    assert result.status.state == "idle"
    ended = agents.bodies(ME, TurnEnded)
    assert [(e.outcome, e.reason) for e in ended] == [("stopped", "Stopped on request.")]
    assert [f.content for f in agents.bodies(ME, ToolFinished)] == ["6"], "round 1 only"
    assert ended[0].usage.completion_tokens > 0, "the usage of the rounds it ran is kept"


async def test_a_child_reports_and_the_waiting_parent_goes_on(agents: Agents) -> None:
    spec = msgspec.structs.replace(SPEC, can_spawn=True)
    child_task = script({"reply": "child says hi"})
    parent = script(
        {"calls": [{"name": "spawn_agent", "arguments": {"task": child_task}}]},
        {"calls": [{"name": "wait"}]},
        {"reply": "parent heard: {results}"},
    )
    waiting = await agents.wake(ME, Message(parent, spec=spec))
    assert waiting.status.state == "waiting"
    spawned = agents.bodies(ME, ChildSpawned)
    assert len(spawned) == 1
    sends = [s for s in agents.outbox if s.key == spawned[0].child]
    assert [s.idempotency_key for s in sends] == [f"spawn {spawned[0].child}"]

    child_result, parent_result = await agents.deliver()
    assert child_result.reply == "child says hi"
    assert [r.reply for r in agents.bodies(ME, ChildReported)] == ["child says hi"]
    assert parent_result.status.state == "idle"
    assert "child says hi" in parent_result.reply
    assert [e.outcome for e in agents.bodies(ME, TurnEnded)] == ["succeeded"]


async def test_a_call_waits_for_its_approval_and_runs_once_approved(agents: Agents) -> None:
    spec = msgspec.structs.replace(SPEC, tools={"calculator": "ask"})
    text = script(calculate("5*5"), {"reply": "approved: {results}"})
    waiting = await agents.wake(ME, Message(text, spec=spec))
    assert waiting.status.state == "waiting"
    (asked,) = agents.bodies(ME, ApprovalRequested)
    timers = [msgspec.json.decode(s.arg, type=WakeEnvelope).wake for s in agents.outbox]
    assert timers == [Timer("park", turn=1)], "the park timer, sent with a delay"
    assert agents.bodies(ME, ToolFinished) == []

    done = await agents.wake(ME, Approval(asked.request_id, approve=True))
    assert done.reply == "approved: 25"
    assert [f.content for f in agents.bodies(ME, ToolFinished)] == ["25"]
    with pytest.raises(restate.TerminalError, match="already answered") as refused:
        await agents.wake(ME, Approval(asked.request_id, approve=True))
    assert refused.value.status_code == 409


def fan_out(levels: int) -> str:
    """A script that spawns two helpers running `fan_out(levels - 1)`, waits for them and
    replies; at 0 levels, a plain reply."""
    if levels == 0:
        return script({"reply": "leaf"})
    task = fan_out(levels - 1)
    spawn = {"name": "spawn_agent", "arguments": {"task": task}}
    return script({"calls": [spawn, spawn]}, {"calls": [{"name": "wait"}]}, {"reply": "done"})


async def test_one_message_brings_no_more_agents_into_being_than_its_budget(
    agents: Agents,
) -> None:
    limits = msgspec.structs.replace(SPEC.limits, max_descendants=3)
    spec = msgspec.structs.replace(SPEC, can_spawn=True, limits=limits)
    await agents.wake(ME, Message(fan_out(3), spec=spec))
    await agents.deliver()

    made = sorted(address for address in agents.states if address != ME)
    assert len(made) == 3, made  # unbounded, three levels of two would make 14
    assert all(address.startswith(f"{ME}.") for address in made)
    refusals = [
        f.content
        for address in agents.states
        for f in agents.bodies(address, ToolFinished)
        if f.status == "error"
    ]
    # The root's helpers get 1 and 0 of the 3; the first one's own helper gets 0: each of
    # those three agents' further spawns (1, 2 and 2) is refused.
    assert len(refusals) == 5, "every spawn past the budget is refused"
    assert all("at most 3 agents into being" in r for r in refusals)
    assert [e.outcome for e in agents.bodies(ME, TurnEnded)] == ["succeeded"]


class ShownTools(ScriptModel):
    """Records what each model call says of `run_command`."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []

    async def step(self, ctx: restate.Context, request: ModelRequest) -> ModelReply:
        self.said += [tool.description for tool in request.tools if tool.name == "run_command"]
        return await super().step(ctx, request)


@pytest.mark.parametrize(("network", "says"), [(False, "no network"), (True, "outbound network")])
async def test_run_command_tells_the_model_whether_its_sandbox_has_the_network(
    tmp_path: Path, network: bool, says: str
) -> None:
    model = ShownTools()
    agents = Agents(tmp_path, model)
    spec = msgspec.structs.replace(
        SPEC, tools=("run_command",), workspace=WorkspaceSettings(network=network)
    )
    await agents.wake(ME, Message(script({"reply": "done"}), spec=spec))
    assert len(model.said) == 1
    assert says in model.said[0]
    assert ("no network" in model.said[0]) is not network


async def test_a_wake_is_lent_the_tenants_tokens_once_and_settles_what_it_used(
    agents: Agents,
) -> None:
    agents.quotas, agents.lendable = TenantQuotas(10_000_000, agents=True), 10_000_000
    text = script(calculate("6*7"), calculate("1+1"), {"reply": "done"})
    assert (await agents.wake(ME, Message(text, spec=SPEC))).reply == "done"
    (lease,) = agents.leases
    used = sum(
        m.usage.prompt_tokens + m.usage.completion_tokens for m in agents.bodies(ME, ModelMessage)
    )
    sent = [(s.handler, s.arg) for s in agents.outbox]
    assert sent == [
        (COUNT_AGENT.name, b""),
        (SETTLE_TOKENS.name, msgspec.json.encode(TokensSettled(lease.day, lease.want, used))),
    ]
