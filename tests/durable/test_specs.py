"""Published specs: versions per kind, and a turn keeps the version it started with."""

from __future__ import annotations

import msgspec
import pytest

from schemas.events import TurnStarted
from schemas.sandbox import WorkspaceSettings
from schemas.spec import AgentSpec, Limits
from schemas.tenant import PublishedSpec, SpecQuery
from schemas.wake import Message
from services.contracts import LATEST_SPEC, PUBLISH, SPECS, Empty
from services.executor.scripted import script
from services.ingress import IngressError
from tests.durable.conftest import LiveStack, eventually

pytestmark = pytest.mark.durable


def publish(stack: LiveStack, tenant: str, spec: AgentSpec) -> PublishedSpec:
    return stack.ingress.call(PUBLISH, spec, tenant)


def test_each_publish_is_a_new_version_and_a_turn_keeps_the_one_it_started_with(
    stack: LiveStack,
) -> None:
    tenant, address = "specs", "specs.writer"
    first = publish(stack, tenant, AgentSpec("writer", "Version one.", model="script"))
    assert first.spec.version == 1
    slow = script({"sleep": 2.0, "reply": "done slowly"})
    stack.ingress.send_wake(address, Message(slow, kind="writer"))
    eventually(lambda: stack.ingress.status(address).state == "running" or None, 30, "turn 1")

    second = publish(stack, tenant, AgentSpec("writer", "Version two.", model="script"))
    assert second.spec.version == 2
    stack.wait_for_turn_end(address, 1)
    later = stack.ingress.message(address, "and now?")

    started = [e.body for e in stack.events(address) if isinstance(e.body, TurnStarted)]
    assert [(s.spec_kind, s.spec_version) for s in started] == [("writer", 1), ("writer", 2)]
    assert later.reply == "You said: and now?"
    latest = stack.ingress.call(LATEST_SPEC, SpecQuery("writer"), tenant).spec
    assert latest is not None
    assert latest.instructions == "Version two."


def test_an_unpublished_kind_is_refused_with_a_sentence(stack: LiveStack) -> None:
    with pytest.raises(IngressError) as refused:
        stack.ingress.wake("specs.nobody", Message("hi", kind="ghost"))
    assert refused.value.status == 404
    assert "No spec of kind 'ghost' is published for tenant 'specs'" in refused.value.message
    assert stack.ingress.status("specs.nobody").turn == 0


def test_a_spec_kind_must_be_a_plain_name(stack: LiveStack) -> None:
    with pytest.raises(IngressError) as refused:
        publish(stack, "specs", AgentSpec("no spaces please", "x"))
    assert refused.value.status == 422
    assert "field 'kind' ('no spaces please') must be 1 to 48" in refused.value.message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            {"kind": "k", "instructions": "x", "model": "nosuchmodel"},
            "The published spec: field 'model': this deployment has no model 'nosuchmodel'. "
            "It offers: ",
        ),
        (
            {"kind": "k", "instructions": "x", "model": "script", "tools": ["ledgr"]},
            "this deployment has no tool 'ledgr'; did you mean 'ledger'?",
        ),
        (
            {"kind": "k", "instructions": "x", "limits": {"max_rounds": 0}},
            "field 'limits.max_rounds' is 0; it must be a whole number from 1 to 100.",
        ),
        ({"kind": "k", "instructions": "x", "modle": "script"}, "Did you mean 'model'?"),
        (
            {"kind": "k", "instructions": "x", "model": "script", "harness": "plann"},
            "field 'harness': this deployment has no harness 'plann'; did you mean 'plan'? "
            "It offers: composition, loop, plan",
        ),
        ({"kind": "k", "instructions": "x", "version": 7}, "field 'version' (7) cannot be set"),
        (
            {"kind": "net", "instructions": "x", "workspace": {"network": True}},
            "field 'workspace.network' is true, but the operator has not granted the network "
            "to tenant 'specs-checked'",
        ),
        (
            {"kind": "k", "instructions": "x", "workspace": {"quota_mb": 5000}},
            "field 'workspace.quota_mb' is 5000, above this deployment's ceiling of 1024 "
            "(TEASPILL_WORKSPACE_MAX_QUOTA_MB).",
        ),
        (
            {"kind": "k", "instructions": "x", "workspace": {"limits": {"memory_mb": 60000}}},
            "field 'workspace.limits.memory_mb' is 60000, above this deployment's ceiling of 2048",
        ),
    ],
)
def test_a_publish_through_ingress_is_checked_against_the_deployment(
    stack: LiveStack, body: dict[str, object], says: str
) -> None:
    with pytest.raises(IngressError) as refused:
        stack.ingress.post(PUBLISH.path("specs-checked"), msgspec.json.encode(body))
    assert refused.value.status == 422
    assert says in refused.value.message
    assert stack.ingress.call(SPECS, Empty(), "specs-checked").versions == ()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (AgentSpec("k", "x", model="nosuchmodel"), "this deployment has no model 'nosuchmodel'"),
        (AgentSpec("k", "x", model="script", tools=("ledgr",)), "did you mean 'ledger'?"),
        (
            AgentSpec("k", "x", model="script", harness="react"),
            "field 'harness': this deployment has no harness 'react'.",
        ),
        (
            AgentSpec("k", "x", model="script", limits=Limits(max_rounds=-3)),
            "field 'limits.max_rounds' is -3; it must be a whole number from 1 to 100.",
        ),
        (
            AgentSpec("k", "x", model="script", workspace=WorkspaceSettings(network=True)),
            "the operator has not granted the network to tenant 'test'",
        ),
    ],
)
def test_a_spec_sent_inline_through_ingress_is_checked_before_anything_happens(
    stack: LiveStack, address: str, spec: AgentSpec, says: str
) -> None:
    with pytest.raises(IngressError) as refused:
        stack.ingress.wake(address, Message("hi", spec=spec))
    assert refused.value.status == 422
    assert refused.value.message.startswith("The message's spec: ")
    assert says in refused.value.message
    assert stack.ingress.status(address).last_seq == 0
