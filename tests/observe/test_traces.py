"""Traces on a real stack exported to a real trace store (Phoenix, over OTLP): the gateway's
request, restate-server's spans, the wake, the model call and the tool call in one trace; a
child's wake linked to its parent's spawn; log lines with the ids of their span.

The gateway and the endpoint export through `wire.py`, which keeps the links Phoenix drops
and passes every export on to Phoenix."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from services.executor.scripted import script
from services.settings import Settings
from services.stack import Stack, isolated_settings
from tests.durable.conftest import eventually
from tests.fixtures.tools import started_path
from tests.fixtures.trace_store import Span, TraceStore, trace_store
from tests.gateway.test_stack import admin_key
from tests.observe.wire import Wire, wire_to

pytestmark = pytest.mark.durable

CALCULATE = script(
    {"calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"reply": "It is {results}"},
)


EXPORTED_WITHIN = 3.0
"""Seconds a finished step's span may take to leave the endpoint (the export interval is
1 s; the SDK's default would be 5 s)."""


@dataclass
class Traced:
    store: TraceStore
    wire: Wire
    stack: Stack
    http: httpx.Client
    key: str

    def send(self, address: str, text: str, traceparent: str, kind: str = "calc") -> None:
        response = self.http.post(
            f"/v1/agents/{address}/messages",
            json={"text": text, "kind": kind},
            headers={"Authorization": f"Bearer {self.key}", "traceparent": traceparent},
        )
        assert response.status_code == 202, response.text

    def ended(self, address: str) -> None:
        def seen() -> bool | None:
            page = self.http.get(
                f"/v1/agents/{address}/timeline?limit=500",
                headers={"Authorization": f"Bearer {self.key}"},
            )
            return (page.status_code == 200 and '"turn_ended"' in page.text) or None

        eventually(seen, 120, f"the turn of {address} to end")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    with trace_store(tmp_path_factory.mktemp("phoenix")) as running:
        yield running


@contextlib.contextmanager
def traced_stack(home: Path, store: TraceStore) -> Iterator[Traced]:
    with wire_to(store.http_url) as (wire, url):
        settings = isolated_settings(
            home,
            tool_modules=("tests.fixtures.tools",),
            otlp_endpoint=url,
            restate_tracing_endpoint=store.grpc_url,
        )
        with _published(settings) as (stack, http, key):
            yield Traced(store, wire, stack, http, key)


@contextlib.contextmanager
def _published(settings: Settings) -> Iterator[tuple[Stack, httpx.Client, str]]:
    with (
        Stack(settings) as stack,
        httpx.Client(base_url=stack.gateway.url, timeout=30) as http,
    ):
        key = admin_key(settings, http)
        published = http.post(
            "/v1/specs",
            json={
                "kind": "calc",
                "instructions": "Calculate.",
                "model": "script",
                "tools": ["calculator", "ledger", "crash"],
            },
            headers={"Authorization": f"Bearer {key}"},
        )
        assert published.status_code == 201, published.text
        parent = {"kind": "parent", "instructions": "Delegate.", "model": "script"}
        published = http.post(
            "/v1/specs",
            json={**parent, "can_spawn": True},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert published.status_code == 201, published.text
        yield stack, http, key


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, store: TraceStore) -> Iterator[Traced]:
    with traced_stack(tmp_path_factory.mktemp("traced-home"), store) as stack:
        yield stack


def new_traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def outline(spans: list[Span]) -> list[tuple[str, str, str | None]]:
    return sorted((s.name, s.span_id, s.parent_id) for s in spans)


def start(span: Span) -> str:
    return span.start


def named(spans: list[Span], prefix: str) -> list[Span]:
    return [s for s in spans if s.name.startswith(prefix)]


def test_one_message_with_a_tool_call_is_one_trace(traced: Traced) -> None:
    header, trace_id, caller = new_traceparent()
    traced.send("acme.traced", CALCULATE, header)
    traced.ended("acme.traced")

    def complete() -> list[Span] | None:
        spans = traced.store.spans(trace_id)
        names = {s.name.split(" ")[0] for s in spans}
        wanted = {"POST", "ingress", "wake", "chat", "execute_tool", "projection"}
        ids = {s.span_id for s in spans} | {caller}
        linked = all(s.parent_id in ids for s in spans)
        return spans if wanted <= names and linked else None

    spans = eventually(complete, 60, "the turn's spans in the store")
    by_id = {s.span_id: s for s in spans}
    (request,) = named(spans, "POST /v1/agents/{address}/messages")
    assert request.parent_id == caller, "the caller's trace is continued"
    assert any(by_id.get(s.parent_id or "") == request for s in named(spans, "ingress"))
    (wake,) = [s for s in named(spans, "wake") if s.attributes["teaspill.wake"] == "Message"]
    attempt = by_id[wake.parent_id or ""]
    assert attempt.name == "invocation-attempt Agent/{key}/wake"
    calls = named(spans, "chat script")
    assert len(calls) == 2
    for call in calls:
        assert call.parent_id == attempt.span_id
        attributes = call.attributes
        assert attributes["gen_ai.request.model"] == "script"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 0
        assert "gen_ai.server.time_to_first_token" in attributes
    (tool,) = named(spans, "execute_tool calculator")
    assert tool.parent_id == attempt.span_id
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert [s.parent_id for s in named(spans, "projection write")] == [wake.span_id]


def ledger_calls(*entries: tuple[str, float]) -> str:
    lines = [
        {"calls": [{"name": "ledger", "arguments": {"entry": entry, "seconds": seconds}}]}
        for entry, seconds in entries
    ]
    return script(*lines, {"reply": "done"})


def test_a_sigkill_mid_turn_leaves_one_span_per_attempt_and_none_twice(traced: Traced) -> None:
    address = "acme.killed"
    header, trace_id, _ = new_traceparent()
    traced.send(address, ledger_calls(("before", 0), ("during", 30), ("after", 0)), header)
    home = traced.stack.settings.home

    def slow_step_started() -> bool | None:
        started = started_path(home).read_text() if started_path(home).exists() else ""
        lines = started.splitlines()
        return (
            any(line.startswith(f"{address}/") and line.endswith("\tduring") for line in lines)
            or None
        )

    def sent_before_the_kill() -> bool | None:
        sent = [s for s in traced.wire.spans() if s.trace_id == trace_id]
        models = [s for s in sent if s.name == "chat script"]
        tools = [s for s in sent if s.name == "execute_tool ledger"]
        return (len(models) == 2 and len(tools) == 1) or None

    eventually(slow_step_started, 60, "the slow step to start")
    # Nothing flushes: the steps that ended before the slow one leave the process by
    # themselves, within the export interval (1 s) and well within this bound.
    eventually(sent_before_the_kill, EXPORTED_WITHIN, "the finished steps' spans sent")
    traced.stack.endpoint.kill()
    traced.stack.endpoint.start()
    traced.ended(address)

    def settled() -> list[Span] | None:
        spans = traced.store.spans(trace_id)
        ids = {s.span_id for s in spans}
        steps = [*named(spans, "chat script"), *named(spans, "execute_tool ledger")]
        linked = all(s.parent_id in ids for s in [*steps, *named(spans, "wake")])
        return spans if len(steps) >= 7 and named(spans, "wake") and linked else None

    try:
        spans = eventually(settled, 60, "the second attempt's spans in the store")
    except AssertionError as error:
        held = outline(traced.store.spans(trace_id))
        raise AssertionError(f"{error}; the store has {held}") from None
    # restate-server retries the wake while the endpoint restarts: attempts that find it
    # down run nothing, and make no span of ours. Each attempt has its one span.
    attempts = sorted(named(spans, "invocation-attempt Agent/{key}/wake"), key=start)
    assert len({a.span_id for a in attempts}) == len(attempts) >= 2
    assert len({s.span_id for s in spans}) == len(spans), "no span was exported twice"
    killed = attempts[0]

    def rounds(prefix: str) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for made in named(spans, prefix):
            found.setdefault(made.parent_id or "", []).append(
                int(made.attributes["teaspill.round"])
            )
        return {parent: sorted(numbers) for parent, numbers in found.items()}

    models, tools = rounds("chat script"), rounds("execute_tool ledger")
    assert models.pop(killed.span_id) == [1, 2]
    assert tools.pop(killed.span_id) == [1], "the killed step's span never ended"
    (rerun,) = models
    assert models[rerun] == [3, 4], "the replayed model steps made no span again"
    assert tools == {rerun: [2, 3]}, "the killed step ran again in the new attempt, then the next"
    assert rerun in {a.span_id for a in attempts[1:]}
    parents = [w.parent_id for w in named(spans, "wake")]
    assert parents == [rerun], "the killed attempt's wake never ended; the new one's is there"


def test_a_child_agent_links_to_its_parents_spawn(traced: Traced) -> None:
    """restate-server starts a trace of its own for each one-way send: the child's wake and
    the parent's wake on its report name the agent at the other end, and link to the
    parent's span of the spawn, in the trace of the parent's message."""
    header, trace_id, _ = new_traceparent()
    child_task = script({"reply": "child is done"})
    parent = script(
        {"calls": [{"name": "spawn_agent", "arguments": {"task": child_task}}]},
        {"calls": [{"name": "wait"}]},
        {"reply": "parent got: {results}"},
    )
    traced.send("acme.parent", parent, header, kind="parent")
    traced.ended("acme.parent")
    child = "acme.parent.t1r1c0"

    def wakes() -> dict[tuple[str, str], Span] | None:
        found = {
            (s.attributes["teaspill.agent"], s.attributes["teaspill.wake"]): s
            for s in named(traced.store.spans(), "wake")
            if s.attributes["teaspill.agent"] in (child, "acme.parent")
        }
        return found if len(found) == 3 else None

    found = eventually(wakes, 60, "the three wakes in the store")
    assert found["acme.parent", "Message"].trace_id == trace_id
    spawned = found[child, "Message"]
    assert spawned.trace_id != trace_id, "the child's wake is in a trace of its own"
    assert (
        spawned.attributes["teaspill.parent.agent"],
        spawned.attributes["teaspill.parent.turn"],
    ) == ("acme.parent", 1)
    reported = found["acme.parent", "ChildReport"]
    assert (
        reported.attributes["teaspill.child.agent"],
        reported.attributes["teaspill.child.turn"],
    ) == (child, 1)

    (spawn,) = named(traced.store.spans(trace_id), "execute_tool spawn_agent")
    assert spawn.attributes["teaspill.child.agent"] == child

    def attempt() -> Span | None:
        return {s.span_id: s for s in traced.store.spans(trace_id)}.get(spawn.parent_id or "")

    spawning = eventually(attempt, 60, "the spawning attempt's span in the store")
    assert spawning.name == "invocation-attempt Agent/{key}/wake"
    sent = {s.span_id: s for s in traced.wire.spans()}
    expected = {(trace_id, spawn.span_id)}
    for wake, why in ((spawned, "spawned by"), (reported, "reported to")):
        links = sent[wake.span_id].links
        assert {(link.trace_id, link.span_id) for link in links} == expected, links
        assert [link.attributes for link in links] == [{"teaspill.link": why}]


def test_a_log_line_written_during_a_turn_carries_its_span(traced: Traced) -> None:
    header, trace_id, _ = new_traceparent()
    address = "acme.logged"
    traced.send(address, script({"calls": [{"name": "crash"}]}, {"reply": "done"}), header)
    traced.ended(address)

    def tool_span() -> Span | None:
        found = named(traced.store.spans(trace_id), "execute_tool crash")
        return found[0] if found else None

    tool = eventually(tool_span, 60, "the crashing tool's span in the store")
    log = (traced.stack.settings.home / "logs" / "endpoint.log").read_text()
    lines = [line for line in log.splitlines() if "The tool crash raised" in line]
    assert len(lines) == 1, lines
    assert f" ERROR services.tools.registry trace_id={trace_id} span_id={tool.span_id} " in lines[0]
