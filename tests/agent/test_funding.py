"""The funding rule on the driver, in process: a turn is refused before it starts once
the tenant's day or the agent's is used (no `turn_started`, the message recorded as
refused, 429 to a sender that waits, a failed report to a parent), and a turn that
started runs to its end however much of the day its rounds use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import restate

from schemas.events import ChildReported, MessageRejected, ModelMessage, TurnEnded, TurnStarted
from schemas.spec import Limits
from schemas.tenant import TokensSettled
from schemas.wake import Message
from services.agent.pipeline import TenantQuotas
from services.contracts import SETTLE_TOKENS
from services.executor.scripted import script
from tests.agent.test_driver import ME, SPEC, Agents, agents, anyio_backend, calculate

pytestmark = pytest.mark.anyio
__all__ = ["agents", "anyio_backend"]

REFUSED = (
    "Tenant acme's agents used the day's 1000 model tokens (TEASPILL_TENANT_DAILY_TOKENS) "
    "on {day} (UTC): no turn starts until midnight UTC."
)


def used(agents: Agents, address: str) -> int:
    return sum(
        m.usage.prompt_tokens + m.usage.completion_tokens
        for m in agents.bodies(address, ModelMessage)
    )


async def test_a_turn_the_tenant_lends_nothing_is_refused_before_it_starts(
    agents: Agents,
) -> None:
    agents.quotas = TenantQuotas(1000)
    with pytest.raises(restate.TerminalError) as refused:
        await agents.wake(ME, Message(script({"reply": "never"}), spec=SPEC, id="m1"))
    sentence = REFUSED.format(day=agents.leases[0].day)
    assert (refused.value.status_code, refused.value.message) == (429, sentence)
    rejected = MessageRejected(script({"reply": "never"}), "m1", sentence)
    assert agents.bodies(ME, MessageRejected) == [rejected]
    assert agents.bodies(ME, TurnStarted) == []
    assert agents.bodies(ME, TurnEnded) == []
    assert agents.outbox == [], "nothing was lent, nothing to settle"


async def test_a_started_turn_runs_to_its_end_past_the_day_and_the_next_is_refused(
    agents: Agents,
) -> None:
    agents.quotas, agents.lendable = TenantQuotas(1000), 12
    text = script(calculate("1+1"), calculate("2+2"), calculate("3+3"), {"reply": "done"})
    assert (await agents.wake(ME, Message(text, spec=SPEC))).reply == "done"
    spent = used(agents, ME)
    assert spent > 12, "the rounds used more than the tenant lent"
    (settled,) = [s for s in agents.outbox if s.handler == SETTLE_TOKENS.name]
    assert msgspec.json.decode(settled.arg, type=TokensSettled).spent == spent

    with pytest.raises(restate.TerminalError) as refused:
        await agents.wake(ME, Message(script({"reply": "never"}), id="m2"))
    assert refused.value.status_code == 429
    assert [e.turn for e in agents.events(ME) if isinstance(e.body, TurnStarted)] == [1]
    assert [r.message_id for r in agents.bodies(ME, MessageRejected)] == ["m2"]


async def test_the_agents_own_day_refuses_its_next_turn_not_the_one_that_passed_it(
    agents: Agents,
) -> None:
    agents.model.clock = datetime.now(UTC).timestamp()  # noqa: TID251 - the day the wake reads
    spec = msgspec.structs.replace(SPEC, limits=Limits(max_daily_tokens=5))
    text = script(calculate("1+1"), calculate("2+2"), {"reply": "done"})
    assert (await agents.wake(ME, Message(text, spec=spec))).reply == "done"
    assert used(agents, ME) > 5

    with pytest.raises(restate.TerminalError) as refused:
        await agents.wake(ME, Message(script({"reply": "never"})))
    assert refused.value.status_code == 429
    assert "its limit for a day (max_daily_tokens = 5)" in refused.value.message
    assert len(agents.bodies(ME, TurnStarted)) == 1


async def test_a_child_refused_before_its_turn_reports_failed_and_its_parent_runs_on(
    agents: Agents,
) -> None:
    agents.quotas, agents.lendable = TenantQuotas(1000), 10
    spawn: dict[str, Any] = {"name": "spawn_agent", "arguments": {"task": "never runs"}}
    parent = script({"calls": [spawn]}, {"calls": [{"name": "wait"}]}, {"reply": "{results}"})
    spec = msgspec.structs.replace(SPEC, tools=("calculator",), can_spawn=True)
    await agents.wake(ME, Message(parent, spec=spec))
    await agents.deliver()

    child = f"{ME}.t1r1c0"
    assert agents.bodies(child, TurnStarted) == []
    (rejected,) = agents.bodies(child, MessageRejected)
    assert rejected.message == REFUSED.format(day=agents.leases[0].day)
    (reported,) = agents.bodies(ME, ChildReported)
    assert reported.outcome == "failed"
    (ended,) = agents.bodies(ME, TurnEnded)
    assert ended.outcome == "succeeded"
    assert rejected.message in ended.reply
