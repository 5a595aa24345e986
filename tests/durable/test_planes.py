"""The control and execution planes as separate deployments, each restartable alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from schemas.spec import AgentSpec
from schemas.wake import Message
from services.cli import health
from services.executor.scripted import script
from services.ingress import Ingress
from services.stack import Endpoint, Stack, free_port, register
from tests.durable.conftest import LiveStack, eventually, stack_settings

pytestmark = pytest.mark.durable

SPEC = AgentSpec(kind="split", instructions="x", model="script", tools=("calculator",))


@pytest.fixture
def split(tmp_path: Path) -> Iterator[tuple[LiveStack, Endpoint]]:
    control = stack_settings(tmp_path)
    execution = control.model_copy(update={"endpoint_port": free_port()})
    execution_endpoint = Endpoint(execution, app="services.app:create_app(control=False)")
    control_app = "services.app:create_app(execution=False)"
    with Stack(control, app=control_app, gateway=False) as stack:
        try:
            execution_endpoint.start()
            register(execution)
            with closing(Ingress(control.ingress_url)) as ingress:
                yield LiveStack(control, stack.restate, stack.endpoint, ingress), execution_endpoint
        finally:
            execution_endpoint.stop()


def test_a_turn_runs_across_two_deployments_and_survives_killing_the_execution_plane(
    split: tuple[LiveStack, Endpoint],
) -> None:
    stack, execution = split
    address = "test.split"
    text = script(
        {"calls": [{"name": "calculator", "arguments": {"expression": "2+3"}}]},
        {"sleep": 3.0, "reply": "2+3 is {results}"},
    )
    stack.ingress.send_wake(address, Message(text, spec=SPEC))
    eventually(lambda: len(stack.shown(address)) >= 4 or None, 30, "the second model call to start")
    assert stack.ingress.status(address).state == "running"
    execution.kill()
    execution.start()

    ended = stack.wait_for_turn_end(address, 1)
    assert ended.reply == "2+3 is 5"
    events = stack.events(address)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [type(e.body).__name__ for e in events].count("ModelMessage") == 2


def test_status_reports_each_plane_where_it_runs(
    split: tuple[LiveStack, Endpoint], capsys: pytest.CaptureFixture[str]
) -> None:
    stack, execution = split
    assert health.status(stack.settings) == 1  # no gateway in this stack
    lines = capsys.readouterr().out.splitlines()
    control_url = stack.settings.endpoint_url
    execution_url = execution.settings.endpoint_url
    assert any(
        line.split()[:2] == ["deployment", "up"] and f"{control_url} (Agent, " in line
        for line in lines
    ), lines
    assert any(
        line.split()[:2] == ["deployment", "up"]
        and f"{execution_url} (Effects, Model, Workspace)" in line
        for line in lines
    ), lines
    assert [line.split()[:2] for line in lines if "gateway" in line] == [["gateway", "down"]]

    execution.kill()
    try:
        health.status(stack.settings)
        lines = capsys.readouterr().out.splitlines()
        assert any(
            line.split()[:2] == ["deployment", "down"] and execution_url in line for line in lines
        )
    finally:
        execution.start()
