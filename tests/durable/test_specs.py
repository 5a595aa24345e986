"""Published specs: versions per kind, and a turn keeps the version it started with."""

from __future__ import annotations

import pytest

from schemas.catalog import PublishedSpec, SpecQuery
from schemas.events import TurnStarted
from schemas.spec import AgentSpec
from schemas.wake import Message
from services.contracts import LATEST_SPEC, PUBLISH
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
    assert refused.value.status == 400
